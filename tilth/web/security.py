"""Who may talk to ``tilth serve``: loopback ``Host`` names and the per-start token.

The rules (SPEC §8.2): a request whose ``Host`` is not a loopback name or address
gets 403 (DNS rebinding); every ``/api/`` request needs the token, as
``Authorization: Bearer <token>`` or — for reads only — the cookie a page visit set;
a state-changing request is a ``POST`` that carries the token in the header, so a
cookie alone never writes (no CSRF). Pages take the token from ``?token=`` once and
set the cookie; static files carry no data and need only the ``Host`` check.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]", "::1")
READ_METHODS = ("GET", "HEAD")

# No outside code, fonts or frames; no inline script at all (model text can never run).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


def new_token() -> str:
    """A fresh random token for one server start."""
    return secrets.token_urlsafe(24)


def cookie_name(port: int) -> str:
    """Cookies ignore ports: each server's cookie is named after its own."""
    return f"tilth-token-{port}"


def host_is_loopback(host: str) -> bool:
    """True for ``127.0.0.1``, ``localhost`` or ``[::1]``, with or without a port."""
    host = host.strip().lower()
    if host.startswith("["):
        name = host[: host.find("]") + 1] if "]" in host else host
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if name.endswith("."):
        name = name[:-1]
    return name in LOOPBACK_NAMES or (name.startswith("127.") and _is_ipv4(name))


def _is_ipv4(name: str) -> bool:
    parts = name.split(".")
    return len(parts) == 4 and all(p.isdigit() and int(p) < 256 for p in parts)


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _bearer(headers: dict[str, str]) -> str | None:
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _cookie(headers: dict[str, str], name: str) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed Cookie header is simply no cookie
        return None
    morsel = jar.get(name)
    return morsel.value if morsel else None


def _query_token(scope: Scope) -> str | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    return values[0] if values else None


def same(given: str | None, token: str) -> bool:
    """Constant-time comparison of a presented token with the server's."""
    return given is not None and secrets.compare_digest(given.encode(), token.encode())


class Guard:
    """ASGI middleware enforcing the Host and token rules, and adding security headers."""

    def __init__(
        self, app: ASGIApp, token: str, port_of: Callable[[], int], state: Any = None
    ) -> None:
        self.app = app
        self.state = state
        """What the wrapped app shares (``tilth.web.state.ServerState``)."""
        self.token = token
        self.port_of = port_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        path: str = scope.get("path", "/")
        method: str = scope.get("method", "GET")
        if not host_is_loopback(headers.get("host", "")):
            await _deny(send, 403, "this server answers only to a loopback Host", _HOST_HINT)
            return
        origin = headers.get("origin")
        if origin and origin != "null" and not host_is_loopback(origin.split("://", 1)[-1]):
            await _deny(send, 403, "requests from other sites are refused", _HOST_HINT)
            return
        cookie = _cookie(headers, cookie_name(self.port_of()))
        set_cookie = False
        if path.startswith("/static/"):
            pass
        elif path.startswith("/api/"):
            bearer = _bearer(headers)
            if same(bearer, self.token):
                pass
            elif same(cookie, self.token) and method in READ_METHODS:
                pass
            elif same(cookie, self.token):
                await _deny(
                    send,
                    401,
                    "a write needs the token in the Authorization header",
                    "send `Authorization: Bearer <token>` (the token is in the URL "
                    "`tilth serve` printed)",
                )
                return
            else:
                await _deny(send, 401, "missing or wrong token", _TOKEN_HINT)
                return
        else:
            if same(_query_token(scope), self.token):
                set_cookie = not same(cookie, self.token)
            elif not (same(cookie, self.token) or same(_bearer(headers), self.token)):
                if "text/html" in headers.get("accept", ""):
                    await _deny_page(send)  # a person at a browser: words, not JSON
                else:
                    await _deny(send, 401, "missing or wrong token", _TOKEN_HINT)
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = list(SECURITY_HEADERS)
                if set_cookie:
                    value = (
                        f"{cookie_name(self.port_of())}={self.token}; Path=/; HttpOnly; "
                        "SameSite=Strict"
                    )
                    extra.append((b"set-cookie", value.encode()))
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


_HOST_HINT = "open the URL `tilth serve` printed (http://127.0.0.1:<port>/...)"
_TOKEN_HINT = "open the URL `tilth serve` printed, which carries ?token=..."


_KEY_PAGE = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>tilth: open the address tilth serve printed</title>
<link rel="stylesheet" href="/static/tilth.css"></head><body class="key-page">
<h1>This address needs the key <code>tilth serve</code> printed</h1>
<p>Each start of <code>tilth serve</code> makes a new key and prints the address that carries
it, <code>http://127.0.0.1:&lt;port&gt;/?token=&hellip;</code>. Open that address; this tab
has no key, or the key of an earlier start.</p>
</body></html>
"""


async def _deny(send: Send, status: int, message: str, hint: str) -> None:
    body = json.dumps({"error": message, "hint": hint}).encode()
    await _answer(send, status, b"application/json", body)


async def _deny_page(send: Send) -> None:
    await _answer(send, 401, b"text/html; charset=utf-8", _KEY_PAGE)


async def _answer(send: Send, status: int, kind: bytes, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", kind),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
