"""The agent loops: interview, worker, evaluator, stages and the outer run loop.

The names below load on first use (``tilth.faces``); the front ends import them from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilth.faces import lazy_face

if TYPE_CHECKING:
    from tilth.agent.progress_sinks import Lane as Lane
    from tilth.agent.progress_sinks import Lanes as Lanes

__getattr__, __dir__ = lazy_face(__name__, __file__)
