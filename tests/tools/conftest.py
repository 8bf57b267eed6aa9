"""The ``backend`` fixture: each sandbox backend under test (see tests/security/conftest.py)."""

from security.conftest import backend

__all__ = ["backend"]
