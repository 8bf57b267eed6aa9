"""``tilth serve``: the local web UI and JSON API over the timeline library.

``create_app`` builds the ASGI app (routes in ``app``, the JSON API in ``api``,
Server-Sent Events in ``stream``, background runs in ``runs``, the Host/token
rules in ``security``); ``server.serve`` binds loopback and runs it on uvicorn.
Pages are templates and plain JavaScript shipped in this package. The names below
load on first use (``tilth.faces``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilth.faces import lazy_face

if TYPE_CHECKING:
    from tilth.web.server import serve as serve

__getattr__, __dir__ = lazy_face(__name__, __file__)
