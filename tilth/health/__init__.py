"""A session's health: diagnosing damage and repairing it from what Tilth recorded.

``tilth doctor <id>`` (``tilth.cli.repair``) is its front end.
"""
