"""How Tilth's git runs inert: the options on every call and the environment it gets.

No user hook, fsmonitor command or background maintenance ever runs from Tilth's git, and no
variable of Tilth's environment points it at another repository or leaks a secret to it.
"""

from __future__ import annotations

import os

from tilth.proc import scrubbed_env

INERT = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "maintenance.auto=false",
)
"""Options on every call: no user hook and no fsmonitor command ever runs from Tilth's git,
and its commits start no background maintenance in the user's repository."""

UNSIGNED = ("-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false")
"""Added unless ``TILTH_SIGN_COMMITS=on``: a user's ``commit.gpgsign`` would run their gpg
(a pinentry prompt in an unattended run, a failing key failing the run) on every stage commit."""

_signing: list[bool] = [False]


def sign_commits(on: bool) -> None:
    """Let Tilth's commits follow the user's signing configuration (``TILTH_SIGN_COMMITS``)."""
    _signing[0] = on


def inert_options() -> tuple[str, ...]:
    """The options every git call carries."""
    return INERT if _signing[0] else INERT + UNSIGNED


# Variables that would point git at another repository or index than the one asked for.
_RELOCATING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


def inert_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Tilth's environment without secrets (API keys, ``TILTH_*``) or repository overrides."""
    env = dict(_inert_base())
    if extra:
        env.update(extra)
    return env


_inert: list[tuple[object, dict[str, str]]] = []
"""The last environment ``_inert_base`` filtered, as (what it was made from, the result)."""


def _inert_base() -> dict[str, str]:
    """``inert_env`` without extras, made again only when ``os.environ`` changed.

    A run calls git thousands of times, and filtering the environment item by item through
    ``os.environ`` cost more than a third of a millisecond each time; comparing the raw
    mapping is a hundred times cheaper.
    """
    raw = getattr(os.environ, "_data", None)
    key: object = frozenset(raw.items()) if isinstance(raw, dict) else None
    if key is not None and _inert and _inert[0][0] == key:
        return _inert[0][1]
    env = scrubbed_env(os.environ)
    for name in _RELOCATING:
        env.pop(name, None)
    env.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"})
    if key is not None:
        _inert[:] = [(key, env)]
    return env
