"""Tools: named Temporal activities, each with the contract true of every use of it.

Importing this package declares the core tools (``s3.*``, ``warehouse.*``). The demo systems'
tools (``billing``, ``crm``, ``email``) are declared in ``plangate.demo``, which only a
deployment that turns them on imports (``activities.extensions``). The tools of an MCP servers
file are made at start by ``tools.mcp`` (the back door), when a deployment names one.

Nothing here imports the rest of the activities: they import the tools, down.
"""

from plangate.activities.tools import s3, warehouse  # noqa: F401  (declaration)
from plangate.activities.tools.registry import (
    TOOLS,
    CallContext,
    ToolArgs,
    ToolSpec,
    declared_in,
    tool,
)

__all__ = ["TOOLS", "CallContext", "ToolArgs", "ToolSpec", "declared_in", "tool"]
