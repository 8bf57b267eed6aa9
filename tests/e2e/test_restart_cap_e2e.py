"""The demo's story: restart T-001 from code_review, then resume under an evaluator cap
of two with one new rejection (the fifth seed: a restart resets the review counters of
the stages it re-runs)."""

from __future__ import annotations

from tests.e2e.lab import Lab, Live
from tests.one_more_rejection import OneMoreRejection
from tilth.model import FakeServer, Script


def test_restart_from_code_review_then_one_new_rejection_under_a_cap_of_two(
    done: Live, lab: Lab
) -> None:
    sid = done.sid
    assert [s for s in done.of_type("stage_rejected") if s["payload"]["task_id"] == "T-001"]
    restarted = done.cli("restart", sid, "T-001", "--from", "code_review", "-y")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert "review counters reset: code_review" in restarted.stdout

    evaluator = OneMoreRejection(lab.script)
    with FakeServer(Script(evaluator)) as server:
        resumed = done.cli(
            "resume",
            sid,
            TILTH_EVALUATOR_BASE_URL=server.base_url,
            TILTH_MAX_EVALUATOR_CALLS_PER_TASK="2",
        )
    assert evaluator.rejected == 1
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert done.statuses() == {"T-001": "done", "T-002": "done"}
    stops = [e["payload"]["reason"] for e in done.of_type("stop")]
    assert stops[-1] == "all_done" and "evaluator_cap" not in stops
