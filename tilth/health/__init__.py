"""A session's health: diagnosing damage and repairing it from what Tilth recorded.

``tilth doctor <id>`` (``tilth.cli.repair``) is its front end. The names below load on
first use (``tilth.faces``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilth.faces import lazy_face

if TYPE_CHECKING:
    from tilth.health.repair import Problem as Problem

__getattr__, __dir__ = lazy_face(__name__, __file__)
