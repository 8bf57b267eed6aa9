"""docs/library.md's example runs as written, and prints what the page says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "library.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text("utf-8"), re.S)


def test_the_library_example_runs_and_undoes_its_rewind(tilth_home: Path) -> None:
    (code,) = _blocks("python")
    out = io.StringIO()
    scope: dict[str, object] = {"__name__": "library_example"}
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), scope)
    printed = out.getvalue().splitlines()
    text = DOC.read_text("utf-8").split("The first lines it prints:", 1)[1]
    (shown,) = re.findall(r"```\n(.*?)```", text, re.S)[:1]
    promised = [line for line in shown.splitlines() if line and line != "..."]
    print("\n".join(printed))
    assert printed[: len(promised)] == promised
    assert any(line.startswith("rewind session ") for line in printed)
    rewound = next(line for line in printed if line.startswith("tasks now:"))
    undone = next(line for line in printed if line.startswith("after undo:"))
    assert "'T-001': 'in_progress'" in rewound and "'T-002': 'pending'" in rewound
    assert undone == "after undo: {'T-001': 'done', 'T-002': 'done'}"
