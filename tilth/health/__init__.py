"""Health: ``tilth doctor``'s checks of the machine and its models (doctor.py), and a
session's damage diagnosed and repaired from what Tilth recorded (repair.py and the rest).

``tilth doctor [<id>]`` (``tilth.cli.doctor``, ``tilth.cli.repair``) is its front end.
The names below load on first use (``tilth.faces``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilth.faces import lazy_face

if TYPE_CHECKING:
    from tilth.health.doctor import Check as Check
    from tilth.health.doctor import as_dicts as as_dicts
    from tilth.health.doctor import ready as ready
    from tilth.health.repair import Problem as Problem

__getattr__, __dir__ = lazy_face(__name__, __file__)
