"""Every file Tilth's own process reads from a directory a model can write goes through
``tilth.safe_read`` (SPEC §5.5): this test lists every other raw read in the package, with
why it is not such a read. A new ``open``/``read_text``/``read_bytes`` fails it until it is
either routed through the safe reader or listed here with its reason."""

from __future__ import annotations

import ast
from pathlib import Path

import tilth

PACKAGE = Path(tilth.__file__).parent
READERS = {"read_text", "read_bytes"}
OWN = "session state or the snapshot store: Tilth's own files"

RAW_READS = {
    "tilth/proc.py:children": "the kernel's process table (/proc), to end a call's processes",
    "tilth/proc.py:processes_with": "the kernel's process table (/proc): parents, groups",
    "tilth/tools/launcher_main.py:children": "the kernel's process table (/proc), in the launcher",
    "tilth/tools/landlock.py:_last_capability": "the kernel's capability count (/proc/sys)",
    "tilth/tools/landlock.py:_add": "opens a directory to grant it to the ruleset, never reads it",
    "tilth/tools/files.py:_write_text": "writes through a descriptor paths.open checked",
    "tilth/tools/paths.py:open": "the worker's file tools: opens one component at a time, no links",
    "tilth/tools/launcher.py:_snapshots": (
        "the worktree's .git file before a call (no link, < 64 kB; no command runs meanwhile)"
    ),
    "tilth/tools/launcher_main.py:_restore": "compares the .git file it puts back (the launcher)",
    "tilth/agent/prompts.py:load_prompt": "package data",
    "tilth/faces.py:lazy_face.load": "a face's own source, for the names it offers",
    "tilth/agent/prompts.py:progress_tail": OWN,
    "tilth/agent/gate/pytest_runner.py:dump": "writes the launcher's report",
    "tilth/agent/gate/pytest_runner.py:main": (
        "the launch plan Tilth wrote (runs in the test process)"
    ),
    "tilth/chat/engine.py:system_prompt": "package data",
    "tilth/chat/session.py:first_prompt": "a thread in the session directory",
    "tilth/config.py:_chat_directories": "checkpoint.json files in the sessions directory",
    "tilth/health/doctor.py:_read_int": "/proc/sys limits",
    "tilth/health/journal_repair.py:_op_id": OWN,
    "tilth/git/repo.py:_surely_no_gitlinks": "the git index, once lstat says small and regular",
    "tilth/git/refs.py:small_text": "non-blocking, capped, regular files only",
    "tilth/model/script.py:from_file": "a script file the user names",
    "tilth/safe_read.py:_open_inside": "the safe reader itself",
    "tilth/seed/interview.py:system_prompt": "package data",
    "tilth/seed/sink.py:_copy_into_place": "the seed sink's own staging files",
    "tilth/seed/sink.py:_transact": "the seed sink's own staging files",
    "tilth/seed/sink.py:_write_synced": "writes",
    "tilth/seed/sink.py:check_test_sources": "the worktree before any worker ran (prep)",
    "tilth/seed/sink.py:recover": "the seed sink's intent file",
    "tilth/seed/terminal.py:load_answers": "an answers file the user names",
    "tilth/session/events.py:_repair_torn_tail": OWN,
    "tilth/session/events.py:_seq_after_tail": OWN,
    "tilth/session/events.py:iter_lines": OWN,
    "tilth/session/events.py:lines_holding": OWN,
    "tilth/health/event_lines.py:_keep": OWN,
    "tilth/health/event_lines.py:repair_event_lines": OWN,
    "tilth/session/events.py:truncate": OWN,
    "tilth/session/files.py:append_line": OWN,
    "tilth/session/files.py:atomic_write_bytes": OWN,
    "tilth/session/files.py:fsync_dir": OWN,
    "tilth/session/files.py:read_at": OWN,
    "tilth/session/files.py:read_json": OWN,
    "tilth/session/live_run.py:_command_line": OWN,
    "tilth/session/live_run.py:_ignores_sigint": OWN,
    "tilth/session/lock.py:acquire": OWN,
    "tilth/session/lock.py:holder_pid": OWN,
    "tilth/session/lock.py:pid_alive": OWN,
    "tilth/session/thread_cache.py:read_records": OWN,
    "tilth/session/threads.py:_floor": OWN,
    "tilth/timeline/record/blob_store.py:_flush": OWN,
    "tilth/timeline/record/blob_store.py:get": OWN,
    "tilth/timeline/record/blob_store.py:put": OWN,
    "tilth/timeline/record/blob_store.py:register_root": OWN,
    "tilth/timeline/record/blob_store.py:read_state": "capture: O_NOFOLLOW|O_NONBLOCK, fstat",
    "tilth/timeline/record/blob_store.py:remember_store": OWN,
    "tilth/timeline/record/blob_store.py:session_store": OWN,
    "tilth/timeline/record/blob_store.py:write_data": OWN,
    "tilth/timeline/record/checkpoints.py:highest_seq": OWN,
    "tilth/timeline/record/recorder.py:_previous_head": OWN,
    "tilth/timeline/record/retention.py:_roots": OWN,
    "tilth/timeline/record/retention.py:_side_references": OWN,
    "tilth/timeline/record/retention.py:due": OWN,
    "tilth/timeline/record/state_capture.py:_last_complete_line": OWN,
    "tilth/timeline/record/state_capture.py:count_lines": OWN,
    "tilth/timeline/record/turn_baseline.py:saved_baseline": OWN,
    "tilth/timeline/rewind/change_report.py:tally_events": OWN,
    "tilth/timeline/rewind/fork_steps.py:_copy_prefix": OWN,
    "tilth/timeline/rewind/journal.py:log_operation": OWN,
    "tilth/timeline/rewind/journal.py:salvage_journal": OWN,
    "tilth/timeline/rewind/state_restore.py:cut_lines": OWN,
    "tilth/timeline/rewind/state_restore.py:truncate_log": OWN,
    "tilth/timeline/rewind/summarize.py:_new_message": OWN,
    "tilth/timeline/rewind/undo.py:_count_lines": OWN,
    "tilth/timeline/rewind/undo_archive.py:copy_tail": OWN,
    "tilth/timeline/rewind/undo_archive.py:restore_archived_checkpoints": OWN,
    "tilth/timeline/rewind/undo_archive.py:splice_events": OWN,
    "tilth/tools/files.py:_read_text": "the worker's read_file tool (tools.paths)",
    "tilth/tools/sandbox.py:bound_sockets": "/proc/net/unix",
    "tilth/ui/io.py:_broken": "/dev/null",
    "tilth/ui/io.py:_devnull": "/dev/null",
    "tilth/web/app.py:__init__": "package data (templates)",
    "tilth/web/runs.py:log_tail": "the web run's log in the session directory",
    "tilth/web/runs.py:start": "writes the web run's log",
}
"""``module:function`` → why its raw read is not of a file a model could have written."""


def raw_reads() -> set[str]:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        where = "tilth/" + path.relative_to(PACKAGE).as_posix()
        _Visitor(where, found).visit(ast.parse(path.read_text("utf-8")))
    return found


class _Visitor(ast.NodeVisitor):
    def __init__(self, where: str, found: set[str]) -> None:
        self.where, self.found, self.stack = where, found, list[str]()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        raw = (
            (isinstance(f, ast.Name) and f.id == "open")
            or (isinstance(f, ast.Attribute) and f.attr in READERS)
            or (isinstance(f, ast.Attribute) and f.attr == "fdopen")
            or (
                isinstance(f, ast.Attribute)
                and f.attr == "open"
                and isinstance(f.value, ast.Name)
                and f.value.id in ("os", "io")
            )
        )
        if raw:
            self.found.add(f"{self.where}:{'.'.join(self.stack) or '<module>'}")
        self.generic_visit(node)


def test_every_raw_read_is_listed_with_its_reason() -> None:
    found = raw_reads()
    assert sorted(found - set(RAW_READS)) == [], "route these through tilth.safe_read, or list why"
    assert sorted(set(RAW_READS) - found) == [], "no longer there: take them off the list"


def test_the_context_file_readers_use_the_safe_reader() -> None:
    for module in ("agent/prompts.py", "agent/evaluator.py", "chat/toolview.py"):
        assert "tilth.safe_read import" in (PACKAGE / module).read_text("utf-8"), module


def test_the_safe_reader_stays_inside_and_reads_only_plain_files(tmp_path: Path) -> None:
    import os

    import pytest

    from tilth.safe_read import UnsafeFile, read_inside

    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "AGENTS.md").write_text("be kind\n")
    (root / "CLAUDE.md").symlink_to("docs/AGENTS.md")  # a link inside: followed
    assert read_inside(root, "CLAUDE.md", 100) == b"be kind\n"
    assert read_inside(root, "docs/AGENTS.md", 4) == b"be k"
    (tmp_path / "secret.env").write_text("TILTH_API_KEY=x\n")
    (root / "out.md").symlink_to("../secret.env")
    (root / "environ.md").symlink_to("/proc/self/environ")
    (root / "docs" / "up.md").symlink_to("../../secret.env")
    os.link(tmp_path / "secret.env", root / "hard.md")
    os.mkfifo(root / "pipe.md")
    (root / "dev.md").symlink_to("/dev/zero")
    for name in ("out.md", "environ.md", "docs/up.md", "hard.md", "pipe.md", "dev.md", "../x"):
        with pytest.raises(UnsafeFile):
            read_inside(root, name, 100)
    with pytest.raises(FileNotFoundError):
        read_inside(root, "missing.md", 100)
