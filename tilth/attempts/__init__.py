"""Best of N and the durable queue (SPEC §11): a task tried N times from its start, the
winner chosen by checks (``figures``) and grafted into its parent (``graft``); attempts
and queued sessions run as DBOS workflows (``engine``, imported only when used).

The names below load on first use (``tilth.faces``); the front ends import them from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilth.faces import lazy_face

if TYPE_CHECKING:
    from tilth.attempts.listing import list_attempts as list_attempts
    from tilth.attempts.pick import PickPlan as PickPlan
    from tilth.attempts.pick import execute_pick as execute_pick
    from tilth.attempts.pick import plan_pick as plan_pick

__getattr__, __dir__ = lazy_face(__name__, __file__)
