"""``bash``: runs in the workspace, sees no secrets, is capped, and dies with its children."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tilth.tools import ToolBox


def test_runs_in_the_workspace_and_reports_exit_code(tmp_path: Path) -> None:
    outcome = ToolBox(tmp_path).dispatch("bash", {"command": "pwd; echo oops >&2; exit 3"})
    assert not outcome.is_error
    assert outcome.result == f"{tmp_path.resolve()}\noops\n[exit 3]"


def test_stdin_is_closed(tmp_path: Path) -> None:
    outcome = ToolBox(tmp_path, bash_timeout=10).dispatch("bash", {"command": "cat; echo done"})
    assert outcome.result == "done\n[exit 0]"


def test_environment_carries_no_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-openai-0001")
    monkeypatch.setenv("TILTH_API_KEY", "sk-fake-tilth-0002")
    monkeypatch.setenv("TILTH_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ODDLY_NAMED_TOKEN", "sk-fake-custom-0003")
    monkeypatch.setenv("HARMLESS_SETTING", "visible-value")
    box = ToolBox(tmp_path, secrets=["sk-fake-custom-0003"])
    result = box.dispatch("bash", {"command": "env"}).result
    for name in ("OPENAI_API_KEY", "TILTH_API_KEY", "TILTH_BASE_URL", "ODDLY_NAMED_TOKEN"):
        assert name not in result
    assert "sk-fake" not in result
    assert "HARMLESS_SETTING=visible-value" in result


def test_secret_printed_by_a_command_is_redacted(tmp_path: Path) -> None:
    (tmp_path / "leak.txt").write_text("key=sk-another-secret-42\n")
    box = ToolBox(tmp_path, secrets=["sk-another-secret-42"])
    result = box.dispatch("bash", {"command": "cat leak.txt"}).result
    assert result == "key=[redacted]\n[exit 0]"


def test_long_output_is_capped_with_head_and_tail(tmp_path: Path) -> None:
    command = "python3 -c \"print('A' * 5000); print('B' * 20000); print('END')\""
    result = ToolBox(tmp_path).dispatch("bash", {"command": command}).result
    assert "[truncated, 25006 chars total]" in result
    assert result.startswith("A" * 100)
    assert result.endswith("END\n[exit 0]")
    assert len(result) < 8_200


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is dead, only unreaped


def _wait_gone(pid: int) -> bool:
    # Polls because the kernel reaps the orphaned grandchild asynchronously.
    for _ in range(100):
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    command = "(sleep 300; echo late) & echo $! > grandchild.pid; echo started; sleep 300"
    outcome = ToolBox(tmp_path, bash_timeout=1).dispatch("bash", {"command": command})
    assert outcome.is_error
    assert "timed out after 1s" in outcome.result
    assert "started" in outcome.result
    pid = int((tmp_path / "grandchild.pid").read_text())
    assert _wait_gone(pid), f"grandchild {pid} survived the timeout"


def test_background_stragglers_are_stopped_when_the_command_returns(tmp_path: Path) -> None:
    command = "sleep 300 & echo $! > bg.pid; echo back"
    outcome = ToolBox(tmp_path, bash_timeout=30).dispatch("bash", {"command": command})
    assert outcome.result == "back\n[exit 0]"
    assert _wait_gone(int((tmp_path / "bg.pid").read_text()))


def test_filesystem_errors_are_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / "plain.txt").write_text("a file, not a directory\n")
    outcome = ToolBox(tmp_path).dispatch("write_file", {"path": "plain.txt/a.txt", "content": "x"})
    assert outcome.is_error
    assert outcome.result.startswith("ERROR: write_file failed: ")
