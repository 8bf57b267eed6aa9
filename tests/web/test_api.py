"""The JSON API on a session made by a scripted run: reads, dry runs, and each go-back verb."""

from __future__ import annotations

import json
import os
from pathlib import Path

from starlette.testclient import TestClient

from tests.lock_holder import held_elsewhere
from tests.web.support import Built
from tilth import git
from tilth.timeline import resolve_checkpoint
from tilth.timeline.rewind.seed_reset import CONFIRM_WARNING


def state(built: Built) -> tuple[str, int, dict[str, str]]:
    """Branch head, event-log size and task statuses: what a go-back would change."""
    statuses = {t["id"]: t["status"] for t in built.session.load_prd()}
    return git.head(built.worktree), built.session.events.size(), statuses


def test_reads(client: TestClient, built: Built) -> None:
    listing = client.get("/api/sessions").json()["sessions"]
    assert [row["id"] for row in listing] == [built.id]
    row = listing[0]
    assert (row["status"], row["tasks_done"], row["tasks_total"], row["kind"]) == (
        "all_done",
        2,
        2,
        "run",
    )
    detail = client.get(f"/api/sessions/{built.id}").json()
    assert detail["checkpoint"]["session_id"] == built.id
    assert detail["status"] == "all_done"
    task = detail["tasks"][0]
    assert task["id"] == "T-001"
    assert task["stages"] == ["planning", "implementing", "code_review", "verifying"]
    assert task["completed_stages"] == task["stages"]
    assert "planning" in task["state"]["outputs"]
    assert detail["locked_by"] is None and detail["run"] is None
    timeline = client.get(f"/api/sessions/{built.id}/checkpoints").json()
    kinds = {cp["kind"] for cp in timeline["checkpoints"]}
    assert kinds == {"seed", "task_start", "stage", "turn", "stop"}
    writes = [cp for cp in timeline["checkpoints"] if "textkit/words.py" in cp["files_changed"]]
    assert writes, timeline
    assert timeline["problems"] == []
    assert "state" not in timeline["checkpoints"][0]


def test_rewind_dry_run_changes_nothing_then_the_rewind_restores_the_file(
    client: TestClient, built: Built
) -> None:
    words = built.worktree / "textkit" / "words.py"
    assert words.exists()
    before = state(built)
    target = resolve_checkpoint(built.session, "T-001")
    url = f"/api/sessions/{built.id}/rewind"
    plan = client.post(url, json={"to": target.id, "scope": "code", "dry_run": True}).json()
    assert plan["dry_run"] is True
    assert ["delete", "textkit/words.py"] in plan["plan"]["files"]
    assert plan["plan"]["scope"] == "code" and plan["plan"]["target"] == target.id
    assert "delete  textkit/words.py" in plan["text"]
    assert state(built) == before

    done = client.post(url, json={"to": target.id, "scope": "code"})
    assert done.status_code == 200, done.text
    assert done.json()["done"] is True
    assert "the Undo button returns to it" in done.json()["text"]  # the page's way back
    assert not words.exists()
    assert git.head(built.worktree) == target.head
    # the tasks whose commits went are wound back exactly as the plan said
    promised = {task: new for task, _, new in plan["plan"]["task_changes"]}
    assert promised == {"T-001": "pending", "T-002": "pending"}
    assert {t["id"]: t["status"] for t in built.session.load_prd()} == promised
    assert built.session.events.events()[-1].type == "rewind"


def test_restart_from_a_stage_shows_the_seed_dialog_facts(client: TestClient, built: Built) -> None:
    url = f"/api/sessions/{built.id}/restart"
    (built.worktree / "scratch.txt").write_text("uncommitted\n")
    preview = client.post(url, json={"task": "T-001", "from": "code_review", "dry_run": True})
    assert preview.status_code == 200, preview.text
    plan = preview.json()
    details = plan["plan"]["details"]
    assert "stages that will re-run: code_review -> verifying" in details
    rolled = len(plan["plan"]["commits_dropped"])
    assert f"commits rolled back: {rolled}" in details
    assert rolled == 6  # T-001 code_review, verifying and all four stages of T-002
    ref = git.stash_ref(built.id)
    assert f"uncommitted changes: 1 file(s) will be saved on {ref}" in " ".join(details)
    assert plan["plan"]["conflicts"] == ["scratch.txt"]
    assert plan["live_run"] is None
    assert (built.worktree / "scratch.txt").exists()

    done = client.post(url, json={"task": "T-001", "from": "code_review"}).json()
    assert done["done"] is True and done["stopped"] is None
    assert git.head(built.worktree) == resolve_checkpoint(built.session, "T-001/implementing").head
    assert {t["id"]: t["status"] for t in built.session.load_prd()} == {
        "T-001": "pending",
        "T-002": "pending",
    }
    assert not (built.worktree / "scratch.txt").exists()
    saved = git.git("show", "--name-only", "--format=%s", ref, cwd=built.worktree)
    assert "scratch.txt" in saved  # the uncommitted change was kept, not lost
    detail = client.get(f"/api/sessions/{built.id}").json()
    assert detail["tasks"][0]["completed_stages"] == ["planning", "implementing"]


def test_an_error_names_the_api_field_not_the_command_line_flag(
    client: TestClient, built: Built
) -> None:
    url = f"/api/sessions/{built.id}/restart"
    refused = client.post(url, json={"task": "T-001", "from": "no_such_stage", "dry_run": True})
    assert refused.status_code == 400, refused.text
    said = refused.json()["error"] + " " + str(refused.json()["hint"])
    assert '"from"' in said and "--from" not in said, said


def test_reset_to_seed_carries_the_cli_warning(client: TestClient, built: Built) -> None:
    url = f"/api/sessions/{built.id}/reset-to-seed"
    before = state(built)
    preview = client.post(url, json={"dry_run": True}).json()
    assert preview["warning"] == CONFIRM_WARNING
    assert "destructive and irreversible" in preview["warning"]
    assert preview["plan"]["op"] == "reset_to_seed"
    assert state(built) == before
    done = client.post(url, json={}).json()
    assert done["done"] is True
    assert git.head(built.worktree) == built.seed_sha
    assert built.session.status == "prepared"
    assert built.session.events.events()[-1].type == "seed_committed"


def test_fork_makes_a_new_session_and_leaves_this_one(client: TestClient, built: Built) -> None:
    before = state(built)
    url = f"/api/sessions/{built.id}/fork"
    preview = client.post(url, json={"at": "T-002", "dry_run": True}).json()
    assert preview["dry_run"] is True and preview["plan"]["fork"]["child"] is None
    assert state(built) == before
    made = client.post(url, json={"at": "T-002"})
    assert made.status_code == 200, made.text
    child = made.json()["id"]
    assert child != built.id
    assert child not in json.dumps(preview), "the dry run named an id the fork never uses"
    ids = [row["id"] for row in client.get("/api/sessions").json()["sessions"]]
    assert ids == [child, built.id]
    row = client.get("/api/sessions").json()["sessions"][0]
    assert row["parent"] == built.id
    assert state(built) == before
    forked = client.get(f"/api/sessions/{child}").json()
    assert forked["checkpoint"]["parent_session"] == built.id
    assert Path(made.json()["workspace"], "textkit", "words.py").exists()
    assert not Path(made.json()["workspace"], "textkit", "shout.py").exists()


def test_a_go_back_while_a_run_holds_the_session_is_409(client: TestClient, built: Built) -> None:
    with held_elsewhere(built.session) as pid:
        answer = client.post(
            f"/api/sessions/{built.id}/rewind", json={"to": "seed", "scope": "both"}
        )
        assert answer.status_code == 409
        assert "in use" in answer.json()["error"]
        # a dry run still shows the plan, and says a run is live
        preview = client.post(
            f"/api/sessions/{built.id}/rewind", json={"to": "seed", "dry_run": True}
        ).json()
        assert preview["live_run"] == pid
        detail = client.get(f"/api/sessions/{built.id}").json()
        assert detail["locked_by"] == pid
    assert client.get(f"/api/sessions/{built.id}").json()["locked_by"] is None


def test_undo_returns_to_before_the_last_go_back(client: TestClient, built: Built) -> None:
    before = state(built)
    words = built.worktree / "textkit" / "words.py"
    went = client.post(f"/api/sessions/{built.id}/rewind", json={"to": "seed", "scope": "both"})
    undo_point = went.json()["result"]["undo_point"]
    assert undo_point and undo_point.startswith("cp-")
    assert not words.exists()
    preview = client.post(f"/api/sessions/{built.id}/undo", json={"dry_run": True})
    assert preview.status_code == 200, preview.text
    assert preview.json()["plan"]["op"] == "undo"
    assert not words.exists()  # the dry run changed nothing
    done = client.post(f"/api/sessions/{built.id}/undo", json={})
    assert done.status_code == 200, done.text
    assert words.exists()
    assert state(built)[0] == before[0]
    assert state(built)[2] == before[2]


def test_a_dry_run_on_a_chat_session_leaves_it_as_it_was(
    client: TestClient, tmp_path: Path
) -> None:
    """A dry run must not resume the chat (no ``running`` status, no new events)."""
    from tilth.chat import ChatEngine
    from tilth.config import load_settings
    from tilth.model import Script, ScriptedModel
    from tilth.model.script import reply, tool_call

    directory = tmp_path / "chat-dir"
    directory.mkdir()
    write = tool_call("write_file", path="a.txt", content="A\n")
    script = Script({"*": [reply("Writing.", write), reply("ok")]})
    settings = load_settings()
    engine = ChatEngine.start(
        settings, directory, ScriptedModel(script, name="chat"), index_in_background=False
    )
    engine.send("make a.txt")
    engine.close()
    session_dir = Path(settings.sessions_dir) / engine.id
    files = sorted(p for p in session_dir.rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in files}

    body = {"to": "cp-0001", "scope": "code", "dry_run": True}
    answer = client.post(f"/api/sessions/{engine.id}/rewind", json=body)
    assert answer.status_code == 200, answer.text
    assert ["delete", "a.txt"] in answer.json()["plan"]["files"]
    assert sorted(p for p in session_dir.rglob("*") if p.is_file()) == files
    assert {p: p.read_bytes() for p in files} == before
    assert (directory / "a.txt").read_text() == "A\n"

    forked = client.post(f"/api/sessions/{engine.id}/fork", json={"at": "cp-0001"}).json()
    assert forked["branch"] is None  # a chat's fork is a directory of its own, no branch
    assert sorted(os.listdir(forked["workspace"])) == []


def test_run_only_verbs_on_a_chat_session_are_a_400_that_changes_nothing(
    client: TestClient, tmp_path: Path
) -> None:
    """restart, reset-to-seed and resume need tasks, a seed and a branch: no 500, no child."""
    from tilth.chat import ChatEngine
    from tilth.config import load_settings
    from tilth.model import Script, ScriptedModel
    from tilth.model.script import reply

    directory = tmp_path / "chat-dir"
    directory.mkdir()
    settings = load_settings()
    model = ScriptedModel(Script({"*": [reply("hello")]}), name="chat")
    engine = ChatEngine.start(settings, directory, model, index_in_background=False)
    engine.send("hi")
    engine.close()
    log = engine.session.events.path.read_bytes()
    for verb, body in (
        ("restart", {"task": "T-001", "dry_run": True}),
        ("reset-to-seed", {"dry_run": True}),
        ("resume", {}),
    ):
        answer = client.post(f"/api/sessions/{engine.id}/{verb}", json=body)
        assert answer.status_code == 400, (verb, answer.text)
        assert "is a chat session" in answer.json()["error"]
    assert engine.session.events.path.read_bytes() == log
    assert not (settings.home / "serve" / "runs" / f"{engine.id}.log").exists()
