"""plangate's guard around a team's own Temporal activities (docs/temporal-agents.md).

    from plangate.temporal import PlangatePlugin

    worker = Worker(client, task_queue="agents", workflows=[...], activities=[...],
                    plugins=[PlangatePlugin("guards.yaml")])

An agent's tools on Temporal: ``guarded_tool(activity, ...)`` (the OpenAI Agents SDK's
``activity_as_tool``, whose guard refusals its model reads; plangate.temporal.agents).
An activity that must never run unguarded: ``@guarded`` under its ``@activity.defn``, or
``require_guard()`` first in its body (plangate.temporal.marker).
"""

from plangate.temporal.agents import guarded_tool
from plangate.temporal.at_call import call_key
from plangate.temporal.errors import GuardHalted, GuardRefused, tool_error_text
from plangate.temporal.marker import guarded, require_guard
from plangate.temporal.plugin import PlangatePlugin
from plangate.temporal.table import ActivityGuard, Check, GuardTable, ReadBack

__all__ = [
    "ActivityGuard", "Check", "GuardHalted", "GuardRefused", "GuardTable", "PlangatePlugin",
    "ReadBack", "call_key", "guarded", "guarded_tool", "require_guard", "tool_error_text",
]
