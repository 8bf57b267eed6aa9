"""``lines_holding``: the block-wise search behind ``payloads_of`` and ``EventLog.last`` finds
exactly the whole lines a line-by-line read would, at every block boundary, and never a torn
last line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tilth.session import events
from tilth.session.events import EventLog, iter_lines, lines_holding, payloads_of


def _log(rng: random.Random) -> str:
    lines = [
        json.dumps(
            {
                "v": 1,
                "seq": n,
                "type": rng.choice(["stop", "stopped", "tool_call", "stop"]),
                "payload": {"reason": "x" * rng.randint(0, 30)},
            }
        )
        for n in range(1, rng.randint(0, 14))
    ]
    text = "\n".join(lines) + ("\n" if lines and rng.random() < 0.7 else "")
    if rng.random() < 0.3:
        text += '{"v": 1, "type": "stop", "payload": {"rea'  # a crash mid-append
    return text


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 20])
def test_the_search_finds_what_a_line_by_line_read_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    monkeypatch.setattr(events, "_BLOCK", block)
    rng = random.Random(block)
    path = tmp_path / "events.jsonl"
    for _ in range(60):
        path.write_text(_log(rng))
        whole = [(line, at, end) for line, at, end, done in iter_lines(path) if done]
        assert list(lines_holding(path, b'"stop"')) == [w for w in whole if b'"stop"' in w[0]]
        stops = [e for e in EventLog(path).read().events if e.type == "stop"]
        assert EventLog(path).last("stop") == (stops[-1] if stops else None)
        assert list(payloads_of(path, "stop")) == [e.payload for e in stops]


def test_a_missing_log_has_no_lines(tmp_path: Path) -> None:
    assert list(lines_holding(tmp_path / "absent.jsonl", b"x")) == []
    assert EventLog(tmp_path / "absent.jsonl").last("stop") is None
