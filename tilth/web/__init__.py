"""``tilth serve``: the local web UI and JSON API over the timeline library.

``create_app`` builds the ASGI app (routes in ``app``, the JSON API in ``api``,
Server-Sent Events in ``stream``, background runs in ``runs``, the Host/token
rules in ``security``); ``server.serve`` binds loopback and runs it on uvicorn.
Pages are templates and plain JavaScript shipped in this package.
"""
