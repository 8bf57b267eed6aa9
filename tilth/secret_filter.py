"""The secret filter: no API key Tilth knows reaches a model, a session file or a page.

The keys are the values of every ``*_API_KEY`` setting: in the process environment
and in every ``.env`` file Tilth read (``config`` tells this module about those).
``scrub`` replaces each with ``[redacted]``; the session files' writers
(``session.files``), the model client's request, ``chat.html`` and the web server's
responses pass everything through it. Values shorter than ``MIN_SECRET`` characters
are not treated as secrets (a local server's ``x`` or ``ollama`` would otherwise blank
every occurrence of an ordinary word).

A stream (a response sent in chunks, a reply streamed delta by delta) is filtered by a
``StreamScrubber``: it holds back the end of what it was given while that end could be
the start of a key, so a key split across two chunks is still found whole.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

PLACEHOLDER = "[redacted]"
MIN_SECRET = 8
_read_from_files: set[str] = set()


def is_secret_name(name: str) -> bool:
    """True for a setting whose value is a key (``*_API_KEY``)."""
    return name.upper().endswith("_API_KEY")


def remember(values: Mapping[str, str]) -> None:
    """Add the keys among ``values`` (a ``.env`` file's settings) to the filter."""
    for name, value in values.items():
        if is_secret_name(name) and len(value.strip()) >= MIN_SECRET:
            _read_from_files.add(value.strip())


_known: list[tuple[object, list[str]]] = []
"""The last ``known_secrets`` answer, with what it was made from."""


def known_secrets() -> list[str]:
    """Every key the filter removes, longest first (so a key inside another goes too).

    Every session file written asks; decoding ``os.environ`` item by item each time was a
    fifth of a best-of-N run's harness time, so the answer is kept until the raw
    environment or the keys read from files change (compared whole: a hundred times cheaper).
    """
    raw = getattr(os.environ, "_data", None)
    key = (frozenset(raw.items()), frozenset(_read_from_files)) if isinstance(raw, dict) else None
    if key is not None and _known and _known[0][0] == key:
        return list(_known[0][1])
    found = set(_read_from_files)
    for name, value in os.environ.items():
        if is_secret_name(name) and len(value.strip()) >= MIN_SECRET:
            found.add(value.strip())
    secrets = sorted(found, key=len, reverse=True)
    if key is not None:
        _known[:] = [(key, secrets)]
    return list(secrets)


def _forms(secret: str) -> Iterable[str]:
    """The secret as written raw, inside a JSON string, and HTML-escaped."""
    yield secret
    yield json.dumps(secret)[1:-1]
    yield json.dumps(secret, ensure_ascii=True)[1:-1]
    yield html.escape(secret)


def scrub(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with every known key replaced by ``[redacted]``."""
    for secret in known_secrets() if secrets is None else secrets:
        if len(secret) < MIN_SECRET:
            continue
        for form in _forms(secret):
            if form in text:
                text = text.replace(form, PLACEHOLDER)
    return text


def scrub_bytes(data: bytes) -> bytes:
    """``scrub`` for UTF-8 bytes (left alone when no key occurs in them)."""
    secrets = known_secrets()
    if not any(s.encode("utf-8", "surrogateescape") in data for s in secrets):
        return data
    return scrub(data.decode("utf-8", "surrogateescape"), secrets).encode(
        "utf-8", "surrogateescape"
    )


def _held_back(text: str, forms: list[str]) -> int:
    """How many characters at the end of ``text`` could begin one of ``forms``."""
    for size in range(min(len(text), max((len(f) for f in forms), default=1) - 1), 0, -1):
        tail = text[-size:]
        if any(form.startswith(tail) for form in forms):
            return size
    return 0


class StreamScrubber:
    """The secret filter for a stream of text pieces: ``feed`` each, ``flush`` at the end.

    What ``feed`` returns never contains a key, nor the start of one that the next piece
    could finish: that end is held back until a later piece (or ``flush``) settles it.
    """

    def __init__(self, secrets: Iterable[str] | None = None) -> None:
        chosen = known_secrets() if secrets is None else secrets
        self.secrets = [secret for secret in chosen if len(secret) >= MIN_SECRET]
        self.forms = [form for secret in self.secrets for form in _forms(secret)]
        self.pending = ""

    def feed(self, piece: str) -> str:
        """What of ``pending + piece`` is safe to pass on now (keys replaced)."""
        if not self.forms:
            return piece
        text = scrub(self.pending + piece, self.secrets)
        keep = _held_back(text, self.forms)
        self.pending = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """The held-back end: the stream is over, so it can begin no key any more."""
        out, self.pending = self.pending, ""
        return out


class ByteStreamScrubber:
    """``StreamScrubber`` for UTF-8 bytes (a response body sent in chunks)."""

    def __init__(self) -> None:
        self.text = StreamScrubber()

    def feed(self, chunk: bytes) -> bytes:
        if not self.text.forms and not self.text.pending:
            return chunk
        decoded = chunk.decode("utf-8", "surrogateescape")
        return self.text.feed(decoded).encode("utf-8", "surrogateescape")

    def flush(self) -> bytes:
        return self.text.flush().encode("utf-8", "surrogateescape")


def scrub_value(value: Any) -> Any:
    """A JSON-like value with every string in it scrubbed (keys of dicts included)."""
    secrets = known_secrets()
    if not secrets:
        return value
    return _scrub_value(value, secrets)


def _scrub_value(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {
            scrub(k, secrets) if isinstance(k, str) else k: _scrub_value(v, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_scrub_value(v, secrets) for v in value]
    return value
