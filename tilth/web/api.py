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
from starlette.responses import Response, StreamingResponse

from tilth.errors import SessionLocked
from tilth.session.store import Session
from tilth.timeline import SCOPES, RewindPlan
from tilth.timeline.controller import TimelineController
from tilth.web import chat_api, views
from tilth.web.bodies import BadRequest, flag_field, plan_json, read_body, text_field
from tilth.web.json_response import JSONResponse
from tilth.web.state import ServerState, state_of
from tilth.web.stream import follow, parse_event_id

if TYPE_CHECKING:
    from tilth.chat import ChatEngine

T = TypeVar("T")


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
    return views.session_kind(session.record().to_dict()) == "chat"


@contextmanager
def _chat_engine(
    state: ServerState, session: Session, *, dry_run: bool
) -> Iterator[ChatEngine | None]:
    """The chat engine a go-back goes through, open only while it runs; a dry run never
    opens one.

    Opening an engine resumes the chat (status ``running``, a ``session_resume`` event),
    which a dry run must not do: without an open engine it plans through the controller,
    which gives the same plan.
    """
    if dry_run or not _is_chat(session):
        yield None
        return
    with state.chats.borrowed(session) as engine:
        yield engine


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
    if detail["kind"] == "chat":
        detail["turn_running"] = state.chats.turn_running(session.id)
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
    last: tuple[int, int] | None = None
    if raw:
        last = parse_event_id(raw)
        if last is None:
            raise BadRequest(
                "Last-Event-ID must be an id this stream sent (<epoch>-<seq>)",
                hint="leave it out to get the whole log",
            )
    return StreamingResponse(
        follow(state.watches, session.events.path, last),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


# ---- go-back verbs ---------------------------------------------------------------------------
def _go_back(
    controller: TimelineController,
    make_plan: Callable[[], RewindPlan],
    *,
    dry_run: bool,
    notes: list[str],
    **extra: Any,
) -> dict[str, Any]:
    """Plan (and, unless a dry run, execute) one go-back under the controller's lock."""
    if dry_run:
        with _planning(controller, notes) as live:
            return plan_json(make_plan(), dry_run=True, live_run=live, notes=notes, **extra)
    with controller.writing(notes.append):
        plan = make_plan()
        result = controller.execute(plan)
    return plan_json(plan, dry_run=False, done=True, result=result.to_dict(), notes=notes, **extra)


async def _answer(state: ServerState, session: Session, work: Callable[[], Any]) -> Response:
    result = await _blocking(work)
    await _changed(state, session)
    return JSONResponse(result)


async def rewind(request: Request) -> Response:
    state, session = _session(request)
    body = await read_body(request)
    to = str(text_field(body, "to"))
    scope = text_field(body, "scope", required=False) or "both"
    if scope not in SCOPES:
        raise BadRequest(f"'scope' must be one of {', '.join(SCOPES)}")
    dry_run, force = flag_field(body, "dry_run"), flag_field(body, "force")
    controller = TimelineController(session, state.settings)

    def work() -> dict[str, Any]:
        with _chat_engine(state, session, dry_run=dry_run) as engine:
            if engine is not None:
                # A chat's turns go back through its engine (prompt back, watcher re-based).
                via_engine = chat_api.rewind(engine, to, scope, dry_run=dry_run, force=force)
                if via_engine is not None:
                    return via_engine
        return _go_back(
            controller,
            # A preview is read by a person: it lists every edit made since (one walk).
            lambda: controller.plan_rewind(
                controller.resolve(to), scope, force=force, survey=dry_run
            ),
            dry_run=dry_run,
            notes=[],
        )

    return await _answer(state, session, work)


async def restart(request: Request) -> Response:
    state, session = _session(request)
    _run_only(session, "restart")
    body = await read_body(request)
    task = str(text_field(body, "task"))
    from_stage = text_field(body, "from", required=False)
    dry_run = flag_field(body, "dry_run")
    controller = TimelineController(session, state.settings)

    def work() -> dict[str, Any]:
        notes: list[str] = []
        stopped = None
        if not dry_run:
            # As `tilth restart`: abort a live run of the session first (it stays resumable).
            stopped = controller.stop_run()
            if stopped is not None:
                notes.append(f"stopped the live run of session {session.id} (pid {stopped})")
        return _go_back(
            controller,
            lambda: controller.plan_restart(task, from_stage),
            dry_run=dry_run,
            notes=notes,
            stopped=stopped,
        )

    return await _answer(state, session, work)


async def reset_to_seed(request: Request) -> Response:
    state, session = _session(request)
    _run_only(session, "reset to seed")
    body = await read_body(request)
    dry_run = flag_field(body, "dry_run")
    controller = TimelineController(session, state.settings)
    from tilth.timeline.rewind.seed_reset import CONFIRM_WARNING

    def work() -> dict[str, Any]:
        return _go_back(
            controller,
            controller.plan_reset_to_seed,
            dry_run=dry_run,
            notes=[],
            warning=CONFIRM_WARNING,
        )

    return await _answer(state, session, work)


async def undo(request: Request) -> Response:
    state, session = _session(request)
    body = await read_body(request)
    dry_run = flag_field(body, "dry_run")
    controller = TimelineController(session, state.settings)

    def work() -> dict[str, Any]:
        with _chat_engine(state, session, dry_run=dry_run) as engine:
            if engine is not None:
                return chat_api.undo(engine, dry_run=dry_run)
        return _go_back(
            controller, lambda: controller.plan_undo(survey=dry_run), dry_run=dry_run, notes=[]
        )

    return await _answer(state, session, work)


async def fork(request: Request) -> Response:
    state, session = _session(request)
    body = await read_body(request)
    at = str(text_field(body, "at"))
    dry_run = flag_field(body, "dry_run")
    controller = TimelineController(session, state.settings)

    def work() -> dict[str, Any]:
        notes: list[str] = []
        if dry_run:
            with _planning(controller, notes) as live:
                plan = controller.plan_fork(controller.resolve(at))
                # The id a dry run reserves is never used: the real fork gets another.
                return plan_json(plan.preview(), dry_run=True, live_run=live, notes=notes)
        with controller.writing(notes.append):
            target = controller.resolve(at)
            result = controller.fork(target)
        notes.extend(result.notes)
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
    if _is_chat(session):
        # A chat turn this server runs is cancelled here, as Ctrl-C cancels it in a
        # terminal; the lock holder is then this very process, which must not be signalled.
        cancelled = await _blocking(lambda: state.chats.cancel_turn(session.id))
        if cancelled:
            await _changed(state, session)
            return JSONResponse({"stopped": None, "cancelled": True})
    controller = TimelineController(session, state.settings)
    stopped = await _blocking(controller.stop_run)
    state.runs.reap()
    await _changed(state, session)
    answer: dict[str, Any] = {"stopped": stopped}
    if _is_chat(session):
        answer["cancelled"] = False
    return JSONResponse(answer)
