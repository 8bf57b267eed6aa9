"""``tilth demo``: the bundled project, the scripted team and the tour through the CLI.

The names below load on first use (``tilth.faces``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilth.faces import lazy_face

if TYPE_CHECKING:
    from tilth.demo.tour import DemoOptions as DemoOptions
    from tilth.demo.tour import run_demo as run_demo

__getattr__, __dir__ = lazy_face(__name__, __file__)
