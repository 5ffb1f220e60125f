"""The names catalogue tools are served under over MCP: names model providers accept.

OpenAI (and most providers) refuse a function whose name does not match
``^[a-zA-Z0-9_-]{1,64}$``; catalogue names are dotted (``s3.put``, ``billing.issue_credit``).
A tool is served under its name with every other character made ``_`` (``s3_put``) and mapped
back exactly: a call names the served tool, the run names the catalogue tool. Two tools that
would serve under one name (with each other, or with one of the plan tools), or a name longer
than 64 characters, are refused when the server is built, naming both: a client must never
reach one tool by the other's name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from plangate.activities.extensions import ExtensionError
from plangate.errors import ConfigurationError

PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")
PATTERN_TEXT = "^[a-zA-Z0-9_-]{1,64}$"
PLAN_TOOLS = ("check_plan", "run_plan", "run_report", "cancel_run")
_OTHER = re.compile(r"[^a-zA-Z0-9_-]")


class NameClash(ConfigurationError, ExtensionError):
    """Catalogue tools that cannot all be served under names a model accepts: the server does
    not start (``plangate mcp`` exits 2 with this line, as for any clashing extension)."""


def served_name(tool: str) -> str:
    """The name ``tool`` is served under: every character outside ``[a-zA-Z0-9_-]`` made ``_``
    (not checked for length: ``served_names`` refuses a name that does not fit)."""
    return _OTHER.sub("_", tool)


def served_names(tools: Iterable[str], reserved: Iterable[str] = PLAN_TOOLS) -> dict[str, str]:
    """Served name -> catalogue name for every tool of ``tools``; ``NameClash`` when a served
    name is taken by another tool or by one of ``reserved`` (the server's own tools), or does
    not fit 64 characters."""
    taken = {name: f"plangate's plan tool {name}" for name in reserved}
    out: dict[str, str] = {}
    for tool in sorted(tools):
        served = served_name(tool)
        if not PATTERN.fullmatch(served):
            raise NameClash(
                f"mcp: tool {tool!r} cannot be served over MCP: its name {served!r} is "
                f"{len(served)} characters, a model accepts {PATTERN_TEXT}; rename the tool"
            )
        if served in taken:
            raise NameClash(
                f"mcp: tool {tool!r} and {taken[served]} would both be served as {served!r} "
                f"(names a model accepts: {PATTERN_TEXT}); rename one of them"
            )
        taken[served] = f"tool {tool!r}"
        out[served] = tool
    return out
