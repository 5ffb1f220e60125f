"""plangate's guard around a team's own Temporal activities (docs/temporal-agents.md).

    from plangate.temporal import PlangatePlugin

    worker = Worker(client, task_queue="agents", workflows=[...], activities=[...],
                    plugins=[PlangatePlugin("guards.yaml")])
"""

from plangate.temporal.at_call import call_key
from plangate.temporal.errors import GuardRefused, tool_error_text
from plangate.temporal.plugin import PlangatePlugin
from plangate.temporal.table import ActivityGuard, Check, GuardTable, ReadBack

__all__ = [
    "ActivityGuard", "Check", "GuardRefused", "GuardTable", "PlangatePlugin", "ReadBack",
    "call_key", "tool_error_text",
]
