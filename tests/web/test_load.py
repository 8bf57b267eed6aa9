"""A bounded loopback load test: 20 clients poll the API and follow SSE while a run writes.

The writer is a separate process that holds the session lock and appends events
through the session's own ``EventLog`` (as the run loop does), about 50 a second
for ``SECONDS``, some of them large. Every client must see every event exactly
once and in order, every poll must succeed, and the log must be intact after.
Traffic goes to 127.0.0.1 only; every loop is bounded in time. Twenty clients for five
seconds (a few hundred events, ten of them large) meet every case fifty for ten did, at a
fifth of the CPU: a suite that is CPU-bound pays for every request the server answers.
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
SECONDS = 5.0
POLL_SECONDS = 1.0

WRITER = """
import sys, time
from pathlib import Path
from tilth.session.store import Session
session = Session(sys.argv[1], Path(sys.argv[2]))
deadline = time.monotonic() + float(sys.argv[3])
n = 0
with session.lock():
    while time.monotonic() < deadline:
        n += 1
        # every 25th event is big (a long tool result), so reads cross many buffers
        text = ("x" * 120_000) if n % 25 == 0 else f"line {n} <b>&amp;</b> é"
        session.log("load_test", n=n, text=text)
        time.sleep(0.02)
print(n)
"""


async def follow(served: Served, sid: str, seqs: list[int], stop: asyncio.Event) -> None:
    headers = {"Authorization": f"Bearer {served.token}"}
    timeout = httpx.Timeout(10, read=SECONDS + 30)
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


async def poll(served: Served, sid: str, failures: list[str], stop: asyncio.Event) -> int:
    headers = {"Authorization": f"Bearer {served.token}"}
    paths = ["/api/sessions", f"/api/sessions/{sid}", f"/api/sessions/{sid}/checkpoints"]
    count = 0
    async with httpx.AsyncClient(base_url=served.base, headers=headers, timeout=30) as client:
        while not stop.is_set():
            path = paths[count % len(paths)]
            try:
                answer = await client.get(path)
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
    followers = [
        asyncio.create_task(follow(served, built.id, received[i], stop)) for i in range(CLIENTS)
    ]
    pollers = [asyncio.create_task(poll(served, built.id, failures, stop)) for _ in range(CLIENTS)]
    await asyncio.sleep(1.0)  # every client connected before the writer starts
    writer = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        WRITER,
        built.id,
        str(built.session.dir),
        str(SECONDS),
        stdout=subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(writer.communicate(), SECONDS + 30)
    assert writer.returncode == 0
    total = len(built.session.events.events())
    deadline = time.monotonic() + 30
    while any(len(r) < total for r in received) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    stop.set()
    polls = await asyncio.wait_for(asyncio.gather(*pollers), 30)
    for task in followers:
        task.cancel()
    await asyncio.gather(*followers, return_exceptions=True)
    return {
        "written": int(out.decode().strip()),
        "received": received,
        "failures": failures,
        "polls": sum(polls),
    }


@pytest.mark.timeout(150)
def test_clients_poll_and_follow_while_a_run_writes(built: Built) -> None:
    before = [e.seq for e in built.session.events.events()]
    with serve() as served:
        result = in_own_thread(lambda: asyncio.run(load(served, built)))
    report = built.session.events.read()
    assert report.skipped == []  # the log is intact: every line parses
    seqs = [e.seq for e in report.events]
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) == len(before) + result["written"]
    assert result["written"] > 75  # about 50 a second, a few of them 120 kB
    for got in result["received"]:
        assert got == seqs  # nothing lost, nothing twice, in order
    assert result["failures"] == []
    assert result["polls"] >= CLIENTS * (SECONDS / POLL_SECONDS) * 0.5
