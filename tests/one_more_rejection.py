"""A scripted team whose next code review is rejected once more (restart + cap tests)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tilth.model.script import Reply, reply, tool_call


class OneMoreRejection:
    """Answers as ``team`` does, except that the first code review it sees is a rejection."""

    def __init__(self, team: Callable[[str, dict[str, Any]], Reply]) -> None:
        self.team = team
        self.rejected = 0

    def __call__(self, model: str, request: dict[str, Any]) -> Reply:
        tools = {t.get("function", {}).get("name") for t in request.get("tools") or []}
        text = json.dumps(request.get("messages"))
        if "submit_verdict" in tools and "## Review: code_review" in text and not self.rejected:
            self.rejected += 1
            verdict = tool_call(
                "submit_verdict",
                verdict="reject",
                rejection_category="weak_test",
                concern="one more look: the empty string case is not exercised",
                evidence=[],
                next_step="check the empty string once more",
            )
            return reply(None, verdict)
        return self.team(model, request)
