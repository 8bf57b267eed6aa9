"""The serve rules: token, loopback Host, POST-with-header writes, 404s, no traceback."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tests.web.conftest import BASE, TOKEN, app_client
from tests.web.support import Built
from tilth import git
from tilth.web.security import cookie_name, host_is_loopback

READS = ["", "/checkpoints"]
WRITES = ["rewind", "restart", "reset-to-seed", "fork", "undo", "resume", "stop", "messages"]


def fingerprint(built: Built) -> tuple[str, str]:
    """Every file of the session directory (worktree included) and the branch head."""
    digest = hashlib.sha256()
    for path in sorted(built.session.dir.rglob("*")):
        if path.is_file() and ".git" not in path.parts:
            digest.update(str(path.relative_to(built.session.dir)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest(), git.head(built.worktree)


def test_no_token_is_401_on_every_api_route_and_page(built: Built, tilth_home: Path) -> None:
    sid = built.id
    with app_client() as anonymous:
        paths = ["/api/sessions", *(f"/api/sessions/{sid}{p}" for p in READS), "/", f"/s/{sid}"]
        for path in paths:
            answer = anonymous.get(path)
            assert answer.status_code == 401, path
            assert answer.json()["error"] == "missing or wrong token"
            assert "token" in answer.json()["hint"]
        for verb in WRITES:
            answer = anonymous.post(f"/api/sessions/{sid}/{verb}", json={})
            assert answer.status_code == 401, verb
        wrong = anonymous.get("/api/sessions", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401


def test_a_foreign_host_is_403_even_with_the_token(client: TestClient) -> None:
    for host in ("evil.example", "tilth.attacker.test:8765", "192.168.1.5:8765", "127.0.0.1.evil"):
        answer = client.get("/api/sessions", headers={"Host": host})
        assert answer.status_code == 403, host
        assert "loopback" in answer.json()["error"]
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "localhost"):
        assert client.get("/api/sessions", headers={"Host": host}).status_code == 200, host


def test_loopback_names() -> None:
    assert host_is_loopback("127.0.0.1:1")
    assert host_is_loopback("127.3.2.1")
    assert host_is_loopback("LOCALHOST.:80")
    assert host_is_loopback("[::1]:9")
    assert not host_is_loopback("")
    assert not host_is_loopback("localhost.evil.test")
    assert not host_is_loopback("127.0.0.1.nip.io")
    assert not host_is_loopback("[::2]:80")


def test_a_request_from_another_origin_is_refused(client: TestClient, built: Built) -> None:
    answer = client.post(
        f"/api/sessions/{built.id}/stop", headers={"Origin": "http://evil.example"}, json={}
    )
    assert answer.status_code == 403


def test_the_page_sets_a_cookie_that_reads_but_never_writes(built: Built) -> None:
    with app_client() as browser_like:
        page = browser_like.get(f"/?token={TOKEN}")
        assert page.status_code == 200
        assert browser_like.cookies.get(cookie_name(8765)) == TOKEN
        assert "HttpOnly" in page.headers["set-cookie"]
        assert "SameSite=Strict" in page.headers["set-cookie"]
        assert browser_like.get("/api/sessions").status_code == 200
        before = fingerprint(built)
        refused = browser_like.post(
            f"/api/sessions/{built.id}/rewind", json={"to": "seed", "scope": "both"}
        )
        assert refused.status_code == 401
        assert "Authorization header" in refused.json()["error"]
        assert fingerprint(built) == before


def test_a_get_changes_nothing(client: TestClient, built: Built) -> None:
    before = fingerprint(built)
    sid = built.id
    for path in ["/", f"/s/{sid}", "/api/sessions", *(f"/api/sessions/{sid}{p}" for p in READS)]:
        assert client.get(path).status_code == 200, path
    # The verbs refuse GET (with the arguments a POST would take in the query string).
    for verb in WRITES:
        answer = client.get(f"/api/sessions/{sid}/{verb}?to=seed&scope=both&task=T-001")
        if verb == "messages":
            continue  # a chat's messages are readable; checked for chat sessions separately
        assert answer.status_code == 405, verb
        assert answer.json()["error"] == "method not allowed"
    assert fingerprint(built) == before


@pytest.mark.parametrize(
    "path",
    [
        "/api/sessions/..%2F..%2Fetc",
        "/api/sessions/../../etc/passwd",
        "/api/sessions/%2e%2e",
        "/api/sessions/20990101-000000-abcdef",
        "/api/sessions/not-a-session/checkpoints",
        "/api/sessions/20990101-000000-abcdef/events",
        "/api/nothing-here",
    ],
)
def test_unknown_or_escaping_session_ids_are_404_json(client: TestClient, path: str) -> None:
    answer = client.get(path)
    assert answer.status_code == 404
    body = answer.json()
    assert body["error"] and "hint" in body


def test_writes_to_unknown_sessions_are_404(client: TestClient) -> None:
    for verb in WRITES:
        answer = client.post(f"/api/sessions/..%2f..%2fx/{verb}", json={})
        assert answer.status_code == 404, verb
        answer = client.post(f"/api/sessions/20990101-000000-abcdef/{verb}", json={"to": "seed"})
        assert answer.status_code == 404, verb
        assert "no session" in answer.json()["error"]


def test_errors_are_json_never_tracebacks(client: TestClient, built: Built) -> None:
    sid = built.id
    cases = [
        ("rewind", b"{not json", 400),
        ("rewind", b"[1, 2]", 400),
        ("rewind", b'{"scope": "both"}', 400),
        ("rewind", b'{"to": "seed", "scope": "everything"}', 400),
        ("rewind", b'{"to": "cp-9999"}', 400),
        ("rewind", b'{"to": "seed", "dry_run": "yes"}', 400),
        ("restart", b'{"task": "T-404"}', 400),
        ("restart", b'{"task": "T-001", "from": "nonsense"}', 400),
        ("fork", b"{}", 400),
        ("rewind", b"[" * 100_000, 400),  # nesting past the parser's depth
        ("rewind", b'{"to": "' + b"a" * (3 << 20) + b'"}', 413),
    ]
    for verb, body, status in cases:
        headers = {"content-type": "application/json"}
        answer = client.post(f"/api/sessions/{sid}/{verb}", content=body, headers=headers)
        assert answer.status_code == status, (verb, body, answer.text)
        data = answer.json()
        assert set(data) == {"error", "hint"}
        assert "Traceback" not in answer.text


def test_pages_load_nothing_from_outside(client: TestClient, built: Built) -> None:
    for path in ["/", f"/s/{built.id}"]:
        answer = client.get(path)
        policy = answer.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert "unsafe-inline" not in policy
        assert answer.headers["referrer-policy"] == "no-referrer"
        text = answer.text
        assert "http://" not in text and "https://" not in text and "//cdn" not in text
    for name in ("common.js", "timeline.js", "session.js", "chat.js", "dialog.js", "tilth.css"):
        asset = client.get(f"/static/{name}")
        assert asset.status_code == 200
        assert "https://" not in asset.text and "http://" not in asset.text
        assert "innerHTML" not in asset.text and "insertAdjacentHTML" not in asset.text


def test_the_cookie_of_another_port_does_not_count(built: Built) -> None:
    with app_client() as other:
        other.cookies.set(cookie_name(9999), TOKEN)
        assert other.get("/api/sessions").status_code == 401
    assert BASE.endswith(":8765")


def test_a_long_reference_is_not_echoed_whole_and_hints_name_fields(
    client: TestClient, built: Built
) -> None:
    answer = client.post(f"/api/sessions/{built.id}/rewind", json={"to": "a" * 100_000})
    assert answer.status_code == 400
    assert len(answer.text) < 1_000 and "100,000 chars" in answer.json()["error"]
    client.post(f"/api/sessions/{built.id}/reset-to-seed", json={})
    answer = client.post(f"/api/sessions/{built.id}/undo", json={"dry_run": True})
    hint = answer.json()["hint"] or ""
    assert hint.endswith("reset-to-seed does not"), hint
