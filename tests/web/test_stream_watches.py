"""A server that followed many sessions' event streams keeps nothing of the streams that
ended: after twenty sessions' pages came and went it holds what it held after one."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.web.support import in_own_thread
from tilth.session.events import EventLog
from tilth.web.stream import Watches, follow


def a_log(directory: Path, events: int) -> Path:
    directory.mkdir(parents=True)
    log = EventLog(directory / "events.jsonl")
    for n in range(events):
        log.append("tool_result", {"n": n, "output": "x" * 2000})
    return log.path


async def open_and_close(watches: Watches, path: Path) -> int:
    """A page following ``path``: reads the backlog, then goes away; the bytes it got."""
    stream = follow(watches, path, None)
    got = 0
    try:
        async for chunk in stream:
            got += len(chunk)
            if got > 20_000:
                break
    finally:
        await stream.aclose()
    return got


def held_after(sessions: int, root: Path) -> tuple[int, int, int]:
    """(logs watched, bytes kept, bytes sent) once ``sessions`` pages opened and closed."""
    logs = [a_log(root / f"s{n}", 40) for n in range(sessions)]

    async def run() -> tuple[int, int, int]:
        watches = Watches()
        sent = 0
        for path in logs:
            sent += await open_and_close(watches, path)
        still = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.2, still.set_result, None)
        await still  # every watch's poll task sees its listeners gone
        return len(watches), watches.held_bytes(), sent

    result: tuple[int, int, int] = in_own_thread(lambda: asyncio.run(run()))
    return result


def test_streams_that_ended_leave_nothing_behind(tmp_path: Path) -> None:
    one = held_after(1, tmp_path / "one")
    twenty = held_after(20, tmp_path / "twenty")
    assert one[2] > 20_000 and twenty[2] > 20 * 20_000  # each page got its backlog
    assert twenty[:2] == one[:2] == (0, 0)


def test_a_second_page_on_the_same_session_still_shares_the_first_ones_read(
    tmp_path: Path,
) -> None:
    path = a_log(tmp_path / "s", 10)

    async def run() -> tuple[int, int]:
        watches = Watches()
        first = follow(watches, path, None)
        await first.__anext__()  # retry: line
        backlog = await first.__anext__()
        second = follow(watches, path, None)
        await second.__anext__()
        shared = await second.__anext__()
        kept = watches.held_bytes()
        await first.aclose()
        await second.aclose()
        return kept, len(shared) - len(backlog) + watches.held_bytes() + len(watches)

    kept, rest = in_own_thread(lambda: asyncio.run(run()))
    assert kept > 0 and rest == 0
