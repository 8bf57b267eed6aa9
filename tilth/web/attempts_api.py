"""``POST /api/sessions/<id>/attempts/pick {session, dry_run}``: another attempt in its
task's winner's place, planned (dry run), confirmed, then carried out; Undo after it."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tilth import TimelineController
from tilth.attempts import execute_pick, plan_pick
from tilth.web import views
from tilth.web.bodies import flag_field, read_body, text_field
from tilth.web.state import state_of


async def pick(request: Request) -> Response:
    from starlette.concurrency import run_in_threadpool

    state = state_of(request)
    session = views.open_session(state.settings, str(request.path_params["session_id"]))
    body = await read_body(request)
    attempt = str(text_field(body, "session"))
    dry_run = flag_field(body, "dry_run")
    controller = TimelineController(session, state.settings)

    def work() -> dict[str, Any]:
        if dry_run:
            plan = plan_pick(controller, attempt)
            return {"plan": plan.to_dict(), "text": plan.render("the Undo button"), "dry_run": True}
        with controller.writing():
            plan = plan_pick(controller, attempt)
            execute_pick(controller, plan)
        text = plan.render("the Undo button")
        return {"plan": plan.to_dict(), "text": text, "dry_run": False, "done": True}

    result = await run_in_threadpool(work)
    await state.watches.bump(session.events.path)
    return JSONResponse(result)
