"""The JSON API: each endpoint one thin call into the library (SPEC §8.2).

Reads go through ``tilth.web.views``; every go-back is resolve → plan → (dry run:
return the plan) → execute on the ``TimelineController``, inside its ``writing()``
(session lock + crash recovery), exactly as the CLI verbs do. Blocking work runs
in a worker thread. Errors are ``{"error", "hint"}`` with a 4xx/5xx status.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from tilth.errors import SessionLocked, TilthError, UsageError
from tilth.session.store import Session
from tilth.timeline import SCOPES, RewindPlan
from tilth.timeline.controller import TimelineController
from tilth.web import chat_api, views
from tilth.web.state import ServerState, state_of
from tilth.web.stream import follow

if TYPE_CHECKING:
    from tilth.chat import ChatEngine

T = TypeVar("T")


class NotAvailable(TilthError):
    """The library does not offer this operation (yet)."""


class BadRequest(UsageError):
    """The request body is not what the endpoint takes."""


# ---- helpers -----------------------------------------------------------------------------------
async def read_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        data = await request.json()
    except ValueError:
        raise BadRequest("the request body is not JSON", hint="send a JSON object") from None
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    return data


def _text(body: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        if required:
            raise BadRequest(f"{key!r} is required", hint=f'e.g. {{"{key}": "..."}}')
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{key!r} must be a string")
    return value


def _flag(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise BadRequest(f"{key!r} must be true or false")
    return value


def _session(request: Request) -> tuple[ServerState, Session]:
    state = state_of(request)
    return state, views.open_session(state.settings, str(request.path_params["session_id"]))


def _run_only(session: Session, verb: str) -> None:
    """A 400 for a verb that needs a run's tasks, seed and branch, which a chat has not."""
    if _is_chat(session):
        raise BadRequest(
            f"session {session.id} is a chat session: {verb} works on runs (tasks, a seed, "
            "a branch), which a chat does not have",
            hint="a chat goes back with rewind to one of its turns, or continues in its composer",
        )


def _library(controller: TimelineController, name: str) -> Callable[..., Any]:
    """A controller method by name; a clear 501 while the library does not have it."""
    method = getattr(controller, name, None)
    if method is None:
        raise NotAvailable(
            f"this version of tilth's timeline has no {name}()",
            hint="use the command line for this operation",
        )
    return method


def plan_json(plan: Any, **extra: Any) -> dict[str, Any]:
    """A plan as the API returns it: its data (``to_dict``) and its words (``render``)."""
    return {"plan": plan.to_dict(), "text": plan.render(), **extra}


@contextmanager
def _planning(controller: TimelineController, notes: list[str]) -> Iterator[int | None]:
    """For a dry run: hold the lock when free; while a run drives the session, plan unlocked.

    Planning only reads, so showing the plan of a restart while a run is live is
    safe; the operation itself then stops the run (restart) or is refused. Yields
    the pid of the live run, or None.
    """
    with ExitStack() as stack:
        live: int | None = None
        try:
            stack.enter_context(controller.writing(notes.append))
        except SessionLocked:
            live = views.lock_holder(controller.session) or -1
        yield live


def _is_chat(session: Session) -> bool:
    return views.session_kind(session.checkpoint()) == "chat"


def _chat_engine(state: ServerState, session: Session, *, dry_run: bool) -> ChatEngine | None:
    """The chat engine a go-back goes through; a dry run never opens one.

    Opening an engine resumes the chat (status ``running``, a ``session_resume`` event),
    which a dry run must not do: without an open engine it plans through the controller,
    which gives the same plan.
    """
    return state.chats.opened(session.id) if dry_run else state.chats.get(session)


async def _blocking(fn: Callable[[], T]) -> T:
    return await run_in_threadpool(fn)


async def _changed(state: ServerState, session: Session) -> None:
    await state.watches.bump(session.events.path)


# ---- reads -------------------------------------------------------------------------------------
async def list_sessions(request: Request) -> Response:
    state = state_of(request)
    rows = await _blocking(lambda: views.sessions_list(state.settings))
    for row in rows:
        row["run"] = state.runs.state(str(row["id"]))
    return JSONResponse({"sessions": rows})


async def get_session(request: Request) -> Response:
    state, session = _session(request)
    state.runs.reap()
    detail = await _blocking(lambda: views.session_detail(session, state.settings))
    run = state.runs.get(session.id)
    detail["run"] = run.state() if run else None
    if run is not None and run.state()["exit_code"] not in (None, 0):
        detail["run"]["output"] = run.log_tail()
    return JSONResponse(detail)


async def get_checkpoints(request: Request) -> Response:
    state, session = _session(request)
    controller = TimelineController(session, state.settings)
    return JSONResponse(await _blocking(lambda: views.checkpoints(controller)))


async def get_events(request: Request) -> Response:
    state, session = _session(request)
    raw = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
    last: int | None = None
    if raw:
        if not raw.strip().isdigit():
            raise BadRequest("Last-Event-ID must be an event's seq number")
        last = int(raw)
    return StreamingResponse(
        follow(state.watches, session.events.path, last),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


# ---- go-back verbs ---------------------------------------------------------------------------
async def rewind(request: Request) -> Response:
    state, session = _session(request)
    body = await read_body(request)
    to = _text(body, "to")
    scope = _text(body, "scope", required=False) or "both"
    if scope not in SCOPES:
        raise BadRequest(f"'scope' must be one of {', '.join(SCOPES)}")
    dry_run, force = _flag(body, "dry_run"), _flag(body, "force")
    controller = TimelineController(session, state.settings)
    chat = _is_chat(session)

    def work() -> dict[str, Any]:
        notes: list[str] = []
        engine = _chat_engine(state, session, dry_run=dry_run) if chat else None
        if engine is not None:
            # A chat's turns go back through its engine (prompt back, watcher re-based).
            via_engine = chat_api.rewind(engine, str(to), scope, dry_run=dry_run, force=force)
            if via_engine is not None:
                return via_engine
        if dry_run:
            with _planning(controller, notes) as live:
                plan = controller.plan_rewind(controller.resolve(str(to)), scope, force=force)
                return plan_json(plan, dry_run=True, live_run=live, notes=notes)
        with controller.writing(notes.append):
            plan = controller.plan_rewind(controller.resolve(str(to)), scope, force=force)
            controller.execute(plan)
        return plan_json(plan, dry_run=False, done=True, notes=notes)

    result = await _blocking(work)
    await _changed(state, session)
    return JSONResponse(result)


async def restart(request: Request) -> Response:
    state, session = _session(request)
    _run_only(session, "restart")
    body = await read_body(request)
    task = _text(body, "task")
    from_stage = _text(body, "from", required=False)
    dry_run = _flag(body, "dry_run")
    controller = TimelineController(session, state.settings)

    def work() -> dict[str, Any]:
        notes: list[str] = []
        if dry_run:
            with _planning(controller, notes) as live:
                plan = controller.plan_restart(str(task), from_stage)
                return plan_json(plan, dry_run=True, live_run=live, notes=notes)
        from tilth.session.live_run import stop_live_run

        stopped = stop_live_run(session)
        if stopped is not None:
            notes.append(f"stopped the live run of session {session.id} (pid {stopped})")
        with controller.writing(notes.append):
            plan = controller.plan_restart(str(task), from_stage)
            controller.execute(plan)
        return plan_json(plan, dry_run=False, done=True, stopped=stopped, notes=notes)

    result = await _blocking(work)
    await _changed(state, session)
    return JSONResponse(result)


async def reset_to_seed(request: Request) -> Response:
    state, session = _session(request)
    _run_only(session, "reset to seed")
    body = await read_body(request)
    dry_run = _flag(body, "dry_run")
    controller = TimelineController(session, state.settings)
    from tilth.timeline.rewind.seed_reset import CONFIRM_WARNING

    def plan_it() -> RewindPlan:
        method = getattr(controller, "plan_reset_to_seed", None)
        if method is not None:
            plan: RewindPlan = method()
            return plan
        from tilth.timeline.rewind.seed_reset import plan_reset_to_seed, preflight

        return plan_reset_to_seed(session, preflight(session))

    def work() -> dict[str, Any]:
        notes: list[str] = []
        if dry_run:
            with _planning(controller, notes) as live:
                return plan_json(
                    plan_it(), dry_run=True, live_run=live, notes=notes, warning=CONFIRM_WARNING
                )
        with controller.writing(notes.append):
            plan = plan_it()
            controller.execute(plan)
        return plan_json(plan, dry_run=False, done=True, notes=notes, warning=CONFIRM_WARNING)

    result = await _blocking(work)
    await _changed(state, session)
    return JSONResponse(result)


async def undo(request: Request) -> Response:
    state, session = _session(request)
    body = await read_body(request)
    dry_run = _flag(body, "dry_run")
    controller = TimelineController(session, state.settings)

    def work() -> dict[str, Any]:
        notes: list[str] = []
        engine = _chat_engine(state, session, dry_run=dry_run) if _is_chat(session) else None
        if engine is not None:
            return chat_api.undo(engine, dry_run=dry_run)
        plan_undo = _library(controller, "plan_undo")
        if dry_run:
            with _planning(controller, notes) as live:
                return plan_json(plan_undo(), dry_run=True, live_run=live, notes=notes)
        with controller.writing(notes.append):
            plan = plan_undo()
            controller.execute(plan)
        return plan_json(plan, dry_run=False, done=True, notes=notes)

    result = await _blocking(work)
    await _changed(state, session)
    return JSONResponse(result)


async def fork(request: Request) -> Response:
    state, session = _session(request)
    body = await read_body(request)
    at = _text(body, "at")
    dry_run = _flag(body, "dry_run")
    controller = TimelineController(session, state.settings)

    def work() -> dict[str, Any]:
        notes: list[str] = []
        if dry_run:
            plan_fork = _library(controller, "plan_fork")
            with _planning(controller, notes) as live:
                return plan_json(
                    plan_fork(controller.resolve(str(at))), dry_run=True, live_run=live
                )
        with controller.writing(notes.append):
            target = controller.resolve(str(at))
            result = controller.fork(target)
        child = result.session
        return {
            "id": child.id,
            "parent": session.id,
            "checkpoint": target.id,
            "branch": None if _is_chat(child) else child.branch,  # a chat's fork: a directory
            "workspace": str(result.worktree),
            "notes": notes,
        }

    return JSONResponse(await _blocking(work))


# ---- background runs -------------------------------------------------------------------------
async def resume(request: Request) -> Response:
    state, session = _session(request)
    _run_only(session, "resume")
    await read_body(request)
    state.runs.reap()
    run = await _blocking(lambda: state.runs.start(session, views.lock_holder(session)))
    return JSONResponse({"started": True, **run.state()}, status_code=202)


async def stop(request: Request) -> Response:
    state, session = _session(request)
    await read_body(request)
    from tilth.session.live_run import stop_live_run

    stopped = await _blocking(lambda: stop_live_run(session))
    state.runs.reap()
    await _changed(state, session)
    return JSONResponse({"stopped": stopped})
