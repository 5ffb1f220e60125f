"""Tools: named Temporal activities, each with the contract true of every use of it.

Importing this package registers the built-in tools.
"""

from activities.tools import billing, crm, email, s3, warehouse  # noqa: F401  (registration)
from activities.tools.registry import TOOLS, CallContext, ToolArgs, ToolSpec, tool

__all__ = ["TOOLS", "CallContext", "ToolArgs", "ToolSpec", "tool"]
