"""Dispatch: schemas, argument checking, the observer seam and the file tools' contracts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tilth.tools import READ_ONLY_TOOL_NAMES, WORKER_TOOL_NAMES, ToolBox, ToolOutcome


class RecordingObserver:
    """Remembers every observer call in order, with what the file held at that moment."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.seen_content: dict[str, str | None] = {}

    def before_write(self, path: Path) -> None:
        self.calls.append(("before_write", str(path)))
        self.seen_content[str(path)] = path.read_text() if path.exists() else None

    def before_bash(self, command: str) -> None:
        self.calls.append(("before_bash", command))

    def after_bash(self, command: str) -> None:
        self.calls.append(("after_bash", command))


def test_schemas_name_and_require_the_spec_fields(tmp_path: Path) -> None:
    schemas = ToolBox(tmp_path).schemas()
    functions = [s["function"] for s in schemas]
    assert [f["name"] for f in functions] == list(WORKER_TOOL_NAMES)
    required = {f["name"]: f["parameters"]["required"] for f in functions}
    assert required == {
        "bash": ["command"],
        "read_file": ["path"],
        "write_file": ["path", "content"],
        "edit_file": ["path", "old_string", "new_string"],
        "glob": ["pattern"],
        "grep": ["pattern"],
    }
    grep = next(f for f in functions if f["name"] == "grep")
    assert "path_glob" in grep["parameters"]["properties"]
    assert all(s["type"] == "function" for s in schemas)
    assert all(f["description"] for f in functions)


def test_read_only_box_offers_and_accepts_only_its_tools(tmp_path: Path) -> None:
    box = ToolBox(tmp_path, READ_ONLY_TOOL_NAMES)
    assert [s["function"]["name"] for s in box.schemas()] == ["read_file", "glob", "grep"]
    outcome = box.dispatch("write_file", {"path": "x.txt", "content": "x"})
    assert outcome.is_error and "unknown tool 'write_file'" in outcome.result
    assert "read_file, glob, grep" in outcome.result
    assert not (tmp_path / "x.txt").exists()


def test_unknown_name_in_constructor_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="frobnicate"):
        ToolBox(tmp_path, ("read_file", "frobnicate"))


MALFORMED: list[tuple[str, Any, str]] = [
    ("bash", '["ls"]', "must be a JSON object"),
    ("bash", ["ls"], "must be a JSON object"),
    ("bash", "{not json", "not valid JSON"),
    ("bash", "{}", "needs 'command'"),
    ("bash", {"command": ["ls", "-l"]}, "'command' must be a string"),
    ("bash", {"command": "   "}, "non-empty"),
    ("read_file", "42", "must be a JSON object"),
    ("read_file", {"path": 7}, "'path' must be a string"),
    ("read_file", {"path": ""}, "non-empty"),
    ("write_file", {"path": "a.txt"}, "needs 'content'"),
    ("write_file", {"path": "a.txt", "content": None}, "needs 'content'"),
    ("edit_file", {"path": "a.txt", "old_string": "x"}, "needs 'new_string'"),
    ("glob", {"pattern": True}, "'pattern' must be a string"),
    ("grep", {"pattern": "("}, "invalid regular expression"),
    ("grep", {"pattern": "x", "path_glob": 3}, "'path_glob' must be a string"),
    ("launch_rockets", "{}", "unknown tool 'launch_rockets'"),
]


@pytest.mark.parametrize(("tool", "arguments", "message"), MALFORMED)
def test_malformed_arguments_become_error_outcomes(
    tmp_path: Path, tool: str, arguments: Any, message: str
) -> None:
    outcome = ToolBox(tmp_path).dispatch(tool, arguments)
    assert isinstance(outcome, ToolOutcome)
    assert outcome.is_error and not outcome.blocked
    assert outcome.result.startswith("ERROR: ")
    assert message in outcome.result


def test_json_string_arguments_work_like_objects(tmp_path: Path) -> None:
    box = ToolBox(tmp_path)
    outcome = box.dispatch("write_file", json.dumps({"path": "a/b/c.txt", "content": "hi\n"}))
    assert outcome == ToolOutcome("wrote 3 chars to a/b/c.txt")
    assert (tmp_path / "a" / "b" / "c.txt").read_text() == "hi\n"


def test_observer_hears_each_write_before_it_happens(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    observer = RecordingObserver()
    box = ToolBox(tmp_path, observer=observer)
    box.dispatch("write_file", {"path": "a.txt", "content": "new\n"})
    box.dispatch("edit_file", {"path": "a.txt", "old_string": "new", "new_string": "newer"})
    box.dispatch("write_file", {"path": "fresh/b.txt", "content": "b"})
    box.dispatch("read_file", {"path": "a.txt"})
    box.dispatch("glob", {"pattern": "*"})
    target = str(tmp_path.resolve() / "a.txt")
    fresh = str(tmp_path.resolve() / "fresh" / "b.txt")
    assert observer.calls == [
        ("before_write", target),
        ("before_write", target),
        ("before_write", fresh),
    ]
    assert observer.seen_content[fresh] is None
    assert (tmp_path / "a.txt").read_text() == "newer\n"


def test_observer_not_told_about_refused_calls(tmp_path: Path) -> None:
    observer = RecordingObserver()
    box = ToolBox(tmp_path, observer=observer)
    box.dispatch("write_file", {"path": "../x.txt", "content": "x"})
    box.dispatch("write_file", {"path": "x.txt"})
    box.dispatch("bash", {"command": "git push --force"})
    assert observer.calls == []


def test_observer_brackets_bash_even_when_it_fails(tmp_path: Path) -> None:
    observer = RecordingObserver()
    box = ToolBox(tmp_path, observer=observer, bash_timeout=0.5)
    box.dispatch("bash", {"command": "echo hi > made.txt"})
    box.dispatch("bash", {"command": "sleep 5"})
    assert observer.calls == [
        ("before_bash", "echo hi > made.txt"),
        ("after_bash", "echo hi > made.txt"),
        ("before_bash", "sleep 5"),
        ("after_bash", "sleep 5"),
    ]


def test_read_file_caps_long_files(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * 60_000)
    result = ToolBox(tmp_path).dispatch("read_file", {"path": "big.txt"}).result
    assert result.startswith("x" * 50_000)
    assert result.endswith("[truncated, 60000 chars total]")
    assert len(result) < 50_100


@pytest.mark.parametrize(
    ("path", "message"),
    [("missing.txt", "no such file"), ("sub", "not a file"), ("blob.bin", "binary")],
)
def test_read_file_errors(tmp_path: Path, path: str, message: str) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    outcome = ToolBox(tmp_path).dispatch("read_file", {"path": path})
    assert outcome.is_error and message in outcome.result


def test_write_file_refuses_oversized_content(tmp_path: Path) -> None:
    outcome = ToolBox(tmp_path).dispatch("write_file", {"path": "a.txt", "content": "y" * 200_001})
    assert outcome.is_error and "200000" in outcome.result
    assert not (tmp_path / "a.txt").exists()


def test_write_file_allows_empty_content(tmp_path: Path) -> None:
    outcome = ToolBox(tmp_path).dispatch("write_file", {"path": "empty.txt", "content": ""})
    assert not outcome.is_error
    assert (tmp_path / "empty.txt").read_text() == ""


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("absent", "x", "not found"),
        ("dup", "x", "matches 2 places"),
        ("one", "one", "identical"),
        ("", "x", "must not be empty"),
    ],
)
def test_edit_file_needs_exactly_one_match(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    (tmp_path / "f.txt").write_text("dup one dup\n")
    outcome = ToolBox(tmp_path).dispatch(
        "edit_file", {"path": "f.txt", "old_string": old, "new_string": new}
    )
    assert outcome.is_error and message in outcome.result
    assert (tmp_path / "f.txt").read_text() == "dup one dup\n"


def test_edit_file_of_missing_file(tmp_path: Path) -> None:
    outcome = ToolBox(tmp_path).dispatch(
        "edit_file", {"path": "nope.txt", "old_string": "a", "new_string": "b"}
    )
    assert outcome.is_error and "no such file" in outcome.result


def test_glob_matches_like_pathlib(tmp_path: Path) -> None:
    for name in ("a.py", "src/b.py", "src/deep/c.py", "src/d.txt", ".hidden.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x\n")
    box = ToolBox(tmp_path)
    assert box.dispatch("glob", {"pattern": "*.py"}).result.splitlines() == [".hidden.py", "a.py"]
    assert box.dispatch("glob", {"pattern": "**/*.py"}).result.splitlines() == [
        ".hidden.py",
        "a.py",
        "src/b.py",
        "src/deep/c.py",
    ]
    assert box.dispatch("glob", {"pattern": "src/*.[pt][yx]*"}).result.splitlines() == [
        "src/b.py",
        "src/d.txt",
    ]
    assert box.dispatch("glob", {"pattern": "nothing*"}).result == "(no matches)"


def test_glob_and_grep_cap_results(tmp_path: Path) -> None:
    for i in range(210):
        (tmp_path / f"f{i:03}.txt").write_text("needle\n")
    box = ToolBox(tmp_path)
    listed = box.dispatch("glob", {"pattern": "*.txt"}).result.splitlines()
    assert len(listed) == 201 and listed[-1] == "... [stopped at 200 files]"
    found = box.dispatch("grep", {"pattern": "needle"}).result.splitlines()
    assert len(found) == 201 and found[-1] == "... [stopped at 200 matches]"


def test_grep_reports_path_line_and_text(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def hello():\n    return 'hi'\n")
    (tmp_path / "notes.md").write_text("hello there\n")
    box = ToolBox(tmp_path)
    assert box.dispatch("grep", {"pattern": r"hel+o"}).result.splitlines() == [
        "notes.md:1: hello there",
        "src/app.py:1: def hello():",
    ]
    only_py = box.dispatch("grep", {"pattern": "hello", "path_glob": "**/*.py"}).result
    assert only_py == "src/app.py:1: def hello():"
    assert box.dispatch("grep", {"pattern": "zzz"}).result == "(no matches)"


@pytest.mark.parametrize("path", [".git", ".git/config", "sub/../.git/HEAD"])
@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
def test_edit_tools_refuse_to_write_inside_git(tmp_path: Path, tool: str, path: str) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n")
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "sub").mkdir()
    args = {"path": path, "content": "x", "old_string": "[core]", "new_string": "x"}
    observer = RecordingObserver()
    outcome = ToolBox(tmp_path, observer=observer).dispatch(tool, args)
    assert outcome.is_error and "inside .git" in outcome.result
    assert (tmp_path / ".git" / "config").read_text() == "[core]\n"
    assert observer.calls == []


def test_nul_bytes_are_argument_errors(tmp_path: Path) -> None:
    box = ToolBox(tmp_path)
    for tool, args in [("bash", {"command": "echo a\x00b"}), ("read_file", {"path": "a\x00b"})]:
        outcome = box.dispatch(tool, args)
        assert outcome.is_error and "NUL" in outcome.result


@pytest.mark.parametrize(
    ("content", "old", "lines", "what"),
    [
        ("class A:\n\tdef f(self):\n\t\treturn 1\n", "def f(self):\n    return 1", "2-3", "tabs"),
        ("x = 1\r\ny = 2\r\n", "x = 1\ny = 2", "1-2", "line endings: the file's are \\r\\n"),
        ("def f():  \n    return 1   \n", "def f():\n    return 1", "1-2", "trailing spaces"),
        ("if x:\n        a = 1\n        b = 2\n", "a = 1\n    b = 2", "2-3", "indentation"),
    ],
)
def test_edit_file_shows_the_lines_an_old_string_matches_but_for_whitespace(
    tmp_path: Path, content: str, old: str, lines: str, what: str
) -> None:
    """The model sees what differs and the file's own text, and the corrected call works."""
    (tmp_path / "f.py").write_bytes(content.encode())
    box = ToolBox(tmp_path)
    edit = {"path": "f.py", "old_string": old, "new_string": "z = 0"}
    outcome = box.dispatch("edit_file", edit)
    assert outcome.is_error and f"lines {lines} with other whitespace" in outcome.result
    assert what in outcome.result
    shown = outcome.result.split("exactly:\n", 1)[1].rsplit("\nCopy old_string", 1)[0]
    assert shown.rstrip("\r") in content
    fixed = box.dispatch("edit_file", {**edit, "old_string": shown.strip()})
    assert not fixed.is_error and "z = 0" in (tmp_path / "f.py").read_text()


def test_the_whitespace_hint_is_bounded_and_absent_for_other_misses(tmp_path: Path) -> None:
    body = "".join(f"    line_{n} = {n}\n" for n in range(200))
    (tmp_path / "f.py").write_text(body)
    box = ToolBox(tmp_path)
    old = body.replace("    ", "\t")
    outcome = box.dispatch("edit_file", {"path": "f.py", "old_string": old, "new_string": ""})
    assert "lines 1-200 with other whitespace" in outcome.result
    assert "line_19 = 19" in outcome.result and "line_20 = 20" not in outcome.result
    assert len(outcome.result) < 1_000
    miss = {"path": "f.py", "old_string": "line_7 = 8", "new_string": ""}
    missing = box.dispatch("edit_file", miss)
    assert missing.is_error and "whitespace" in missing.result and "occur" not in missing.result
