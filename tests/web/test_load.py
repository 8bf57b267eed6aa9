"""A bounded loopback load test: 20 clients poll the API and follow SSE while a run writes.

The writer is a separate process that holds the session lock and appends ``EVENTS`` events
through the session's own ``EventLog`` (as the run loop does), about 50 a second, some of
them large. Every client must see every event exactly once and in order, every poll must
be answered (each within a generous 30 s, so a server that stops answering fails) by
pollers that keep going from before the writer starts until every event was read, and
the log must be intact after. What is checked is counted, never timed: how fast the
server answered is printed here and measured by ``benchmarks/serve.py`` (its "under load"
figures). Traffic goes to 127.0.0.1 only; every loop is bounded. Twenty clients and a
couple of hundred events (eight of them large) meet every case fifty for ten seconds did,
at a fifth of the CPU.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from tests.web.support import Built, Served, in_own_thread, serve

CLIENTS = 20
EVENTS = 200
"""Events the writer appends (about 50 a second: some four seconds of writing)."""
POLL_SECONDS = 1.0
MIN_POLLS = 3
"""Each poller polls at least this often, and on until the writer is done and read."""

WRITER = """
import sys, time
from pathlib import Path
from tilth.session.store import Session
session = Session(sys.argv[1], Path(sys.argv[2]))
n = 0
with session.lock():
    while n < int(sys.argv[3]):
        n += 1
        # every 25th event is big (a long tool result), so reads cross many buffers
        text = ("x" * 120_000) if n % 25 == 0 else f"line {n} <b>&amp;</b> é"
        session.log("load_test", n=n, text=text)
        time.sleep(0.02)
print(n)
"""


async def follow(served: Served, sid: str, seqs: list[int], stop: asyncio.Event) -> None:
    headers = {"Authorization": f"Bearer {served.token}"}
    timeout = httpx.Timeout(10, read=60)
    async with (
        httpx.AsyncClient(base_url=served.base, headers=headers, timeout=timeout) as client,
        client.stream("GET", f"/api/sessions/{sid}/events") as response,
    ):
        assert response.status_code == 200
        data: list[str] = []
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and data:
                import json

                seqs.append(json.loads("".join(data))["seq"])
                data = []
            elif line.startswith("event: reset"):
                raise AssertionError("the log was never cut; no reset may arrive")
            if stop.is_set():
                return


async def poll(
    served: Served, sid: str, failures: list[str], waits: list[float], stop: asyncio.Event
) -> int:
    """Poll until ``stop`` (and at least ``MIN_POLLS`` times); how many polls were made."""
    headers = {"Authorization": f"Bearer {served.token}"}
    paths = ["/api/sessions", f"/api/sessions/{sid}", f"/api/sessions/{sid}/checkpoints"]
    count = 0
    async with httpx.AsyncClient(base_url=served.base, headers=headers, timeout=30) as client:
        while not stop.is_set() or count < MIN_POLLS:
            path = paths[count % len(paths)]
            try:
                asked = time.monotonic()
                answer = await client.get(path)
                waits.append(time.monotonic() - asked)
                if answer.status_code != 200:
                    failures.append(f"{path}: {answer.status_code} {answer.text[:200]}")
                else:
                    answer.json()
            except httpx.HTTPError as exc:
                failures.append(f"{path}: {type(exc).__name__} {exc}")
            count += 1
            await asyncio.sleep(POLL_SECONDS)
    return count


async def load(served: Served, built: Built) -> dict[str, Any]:
    stop = asyncio.Event()
    received: list[list[int]] = [[] for _ in range(CLIENTS)]
    failures: list[str] = []
    waits: list[float] = []
    followers = [
        asyncio.create_task(follow(served, built.id, received[i], stop)) for i in range(CLIENTS)
    ]
    pollers = [
        asyncio.create_task(poll(served, built.id, failures, waits, stop)) for _ in range(CLIENTS)
    ]
    await asyncio.sleep(1.0)  # every client connected before the writer starts
    started = time.monotonic()
    writer = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        WRITER,
        built.id,
        str(built.session.dir),
        str(EVENTS),
        stdout=subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(writer.communicate(), 120)
    assert writer.returncode == 0
    writing = time.monotonic() - started
    total = len(built.session.events.events())
    deadline = time.monotonic() + 30
    while any(len(r) < total for r in received) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    stop.set()
    polls = await asyncio.wait_for(asyncio.gather(*pollers), 120)
    for task in followers:
        task.cancel()
    await asyncio.gather(*followers, return_exceptions=True)
    written = int(out.decode().strip())
    # The figures, for a person reading the output (-s); nothing below depends on them.
    print(
        f"load: {written} events written in {writing:.1f}s ({written / writing:.0f}/s); "
        f"{len(waits)} polls answered, slowest {max(waits, default=0) * 1000:.0f} ms"
    )
    return {"written": written, "received": received, "failures": failures, "polls": polls}


@pytest.mark.timeout(150)
def test_clients_poll_and_follow_while_a_run_writes(built: Built) -> None:
    before = [e.seq for e in built.session.events.events()]
    with serve() as served:
        result = in_own_thread(lambda: asyncio.run(load(served, built)))
    report = built.session.events.read()
    assert report.skipped == []  # the log is intact: every line parses
    seqs = [e.seq for e in report.events]
    assert seqs == list(range(1, len(seqs) + 1))
    assert result["written"] == EVENTS  # eight of them 120 kB
    assert len(seqs) == len(before) + EVENTS
    for got in result["received"]:
        assert got == seqs  # nothing lost, nothing twice, in order
    assert result["failures"] == []  # every poll answered, none slower than 30 s
    assert len(result["polls"]) == CLIENTS and min(result["polls"]) >= MIN_POLLS
