"""Worker tools behind one dispatch seam, confined to a workspace and guarded.

``ToolBox(root).dispatch(name, arguments)`` runs ``bash``, ``read_file``,
``write_file``, ``edit_file``, ``glob`` or ``grep`` and returns a ``ToolOutcome``;
a ``ToolObserver`` hears about writes and shell commands before they happen,
which is where checkpoints capture what a rewind will need.
"""

from tilth.errors import ToolError
from tilth.tools.base import ToolObserver, ToolOutcome
from tilth.tools.box import READ_ONLY_TOOL_NAMES, WORKER_TOOL_NAMES, ToolBox
from tilth.tools.guard import check_command

__all__ = [
    "READ_ONLY_TOOL_NAMES",
    "WORKER_TOOL_NAMES",
    "ToolBox",
    "ToolError",
    "ToolObserver",
    "ToolOutcome",
    "check_command",
]
