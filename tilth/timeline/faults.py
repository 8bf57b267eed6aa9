"""The fault-injection seam: die at a named step so tests can prove every step is safe.

``TILTH_FAULT_AT=<step>`` makes the process SIGKILL itself just before ``<step>`` runs
(after the journal says it started); ``<step>+`` kills it right after the step's
change, before the journal says it finished.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "TILTH_FAULT_AT"


def fault_point(step: str) -> None:
    """SIGKILL this process when ``TILTH_FAULT_AT`` names ``step`` (tests only)."""
    if os.environ.get(FAULT_ENV, "").strip() == step:
        os.kill(os.getpid(), signal.SIGKILL)
