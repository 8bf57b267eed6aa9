"""The real ``tilth serve``: its first line, and the event log as Server-Sent Events."""

from __future__ import annotations

import os
import re
import socket
import time

import httpx

from tests.warm_cli import shared
from tests.web.sse import messages, take
from tests.web.support import Built, serve
from tilth.session.store import Session


def test_serve_prints_the_tokened_url_first_and_answers_only_with_it(built: Built) -> None:
    with serve() as served:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]{20,}", served.url)
        assert httpx.get(served.base + "/api/sessions").status_code == 401
        page = httpx.get(served.url)
        assert page.status_code == 200 and "<title>tilth · sessions</title>" in page.text
        assert served.api("GET", "/api/sessions").json()["sessions"][0]["id"] == built.id
    assert served.process.returncode == 0  # Ctrl-C is how a server ends: exit 0
    with serve() as again:
        assert again.token != served.token


def test_a_port_in_use_is_a_one_line_error(tilth_home: object) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = shared().run(
            ["serve", "--port", str(port), "--no-open"], env=dict(os.environ), timeout=30
        )
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: port {port} on 127.0.0.1 is in use")
    assert "Traceback" not in done.stderr


def _stream(served_client: httpx.Client, sid: str, last: int | str | None = None) -> httpx.Response:
    headers = {"Last-Event-ID": str(last)} if last is not None else {}
    request = served_client.build_request("GET", f"/api/sessions/{sid}/events", headers=headers)
    return served_client.send(request, stream=True)


def test_events_follow_the_log_and_a_reconnect_resumes(built: Built) -> None:
    session: Session = built.session
    existing = [e.seq for e in session.events.events()]
    with serve() as served, served.client(timeout=httpx.Timeout(30, read=30)) as client:
        response = _stream(client, built.id)
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = messages(response)
        backlog = take(stream, len(existing))
        assert [m.data["seq"] for m in backlog] == existing
        assert [m.id for m in backlog] == [f"0-{s}" for s in existing]  # never cut: epoch 0

        start = time.monotonic()
        session.log("note", text="one <b>appended</b>")
        arrived = next(stream)
        assert arrived.data["type"] == "note" and arrived.data["payload"]["text"].startswith("one")
        assert arrived.data["seq"] == existing[-1] + 1
        assert time.monotonic() - start < 5
        for n in range(5):
            session.log("note", n=n)
        assert [m.data["payload"]["n"] for m in take(stream, 5)] == [0, 1, 2, 3, 4]
        response.close()

        # a reconnect with Last-Event-ID gets only what came after it
        session.log("note", n=5)
        again = messages(_stream(client, built.id, last=existing[-1] + 3))
        seqs = [m.data["seq"] for m in take(again, 4)]
        assert seqs == list(range(existing[-1] + 4, existing[-1] + 8))


def test_a_cut_log_sends_reset_then_the_log_again(built: Built) -> None:
    with serve() as served, served.client(timeout=httpx.Timeout(20, read=20)) as client:
        total = len(built.session.events.events())
        stream = messages(_stream(client, built.id))
        take(stream, total)
        rewound = served.api(
            "POST", f"/api/sessions/{built.id}/rewind", {"to": "T-002", "scope": "both"}
        )
        assert rewound.status_code == 200, rewound.text
        reset = next(stream)
        assert reset.event == "reset"
        now = [e.seq for e in built.session.events.events()]
        replay = take(stream, len(now))
        assert [m.data["seq"] for m in replay] == now
        assert replay[-1].data["type"] == "rewind"

        # a client that saw events the cut removed is told to start over on reconnect
        late = messages(_stream(client, built.id, last=total))
        assert next(late).event == "reset"
        assert [m.data["seq"] for m in take(late, len(now))] == now


def test_event_ids_never_repeat_across_a_cut_and_a_reconnect_from_before_it_starts_over(
    built: Built,
) -> None:
    session: Session = built.session
    with serve() as served, served.client(timeout=httpx.Timeout(20, read=20)) as client:
        total = len(session.events.events())
        stream = messages(_stream(client, built.id))
        before = take(stream, total)
        rewound = served.api("POST", f"/api/sessions/{built.id}/rewind", {"to": "T-002"})
        assert rewound.status_code == 200, rewound.text
        assert next(stream).event == "reset"
        kept = len(session.events.events())
        # The new log grows past where the old one ended: every seq the client saw comes back.
        for n in range(total):
            session.log("note", n=n)
        after = take(stream, kept + total)
        assert [m.data["seq"] for m in after] == list(range(1, kept + total + 1))
        ids = [m.id for m in after]
        assert len(set(ids)) == len(ids)
        assert not {m.id for m in before} & set(ids), "an id names one event, for good"

        # A client whose last event is from before the cut gets the new log from its start.
        late = messages(_stream(client, built.id, last=before[-1].id))
        assert next(late).event == "reset"
        assert [m.id for m in take(late, kept + total)] == ids
        # One from after the cut resumes right after its event.
        resumed = messages(_stream(client, built.id, last=ids[kept + 2]))
        assert [m.id for m in take(resumed, 3)] == ids[kept + 3 : kept + 6]
        # An id this stream never sent is refused.
        assert _stream(client, built.id, last="soon").status_code == 400


def test_following_the_events_changes_nothing(built: Built) -> None:
    from tests.web.test_security import fingerprint

    before = fingerprint(built)
    total = len(built.session.events.events())
    with serve() as served, served.client(timeout=httpx.Timeout(30, read=30)) as client:
        stream = messages(_stream(client, built.id))
        assert len(take(stream, total)) == total
        again = messages(_stream(client, built.id, last=3))
        assert next(again).data["seq"] == 4
    assert fingerprint(built) == before


def test_ctrl_c_ends_open_event_streams_at_once(built: Built) -> None:
    import os
    import signal
    import threading

    with serve() as served:
        ended = threading.Event()

        def follow() -> None:
            with served.client(timeout=httpx.Timeout(30, read=60)) as client:
                try:
                    for _ in messages(_stream(client, built.id)):
                        pass
                except httpx.HTTPError:
                    pass
            ended.set()

        threading.Thread(target=follow, daemon=True).start()
        time.sleep(1.0)  # the stream is open and idle
        start = time.monotonic()
        os.killpg(served.process.pid, signal.SIGINT)
        assert served.process.wait(15) == 0
        # well before the 3 s graceful-shutdown limit: the stream was ended, not waited out
        assert time.monotonic() - start < 2.5
        assert ended.wait(5)


def test_a_damaged_line_in_the_log_is_never_streamed(built: Built) -> None:
    session: Session = built.session
    existing = [e.seq for e in session.events.events()]
    with (session.dir / "events.jsonl").open("ab") as log:
        log.write(b'{"v": 1, "seq": 99, "ty\xff\xfe garbage\n[1, 2]\n')
    session.log("note", text="after the damage")
    with serve() as served, served.client(timeout=httpx.Timeout(30, read=30)) as client:
        stream = messages(_stream(client, built.id))
        sent = take(stream, len(existing) + 1)
    assert [m.data["seq"] for m in sent[:-1]] == existing
    assert sent[-1].data["payload"]["text"] == "after the damage"
