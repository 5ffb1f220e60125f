"""One Temporal activity per registered tool, named after the tool: its body is the guarded
call (``activities.guarded_call``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from plangate.activities import policing
from plangate.activities.call_checks import as_application_error, bounded, refuse_unless_held
from plangate.activities.catalogue import catalogue as catalogue_of
from plangate.activities.extensions import registry_for
from plangate.activities.guarded_call import read_after, run_guarded
from plangate.activities.probe_activity import ProbeActivities
from plangate.activities.tools.registry import ToolSpec
from plangate.records.calls import ToolCall, ToolResult
from plangate.world.clients import World
from plangate.world.settings import CatalogueSettings, PolicySettings

# what callers and tests have long imported from here
__all__ = ["as_application_error", "bounded", "read_after", "refuse_unless_held",
           "tool_activities"]


def _make(
    spec: ToolSpec[Any], world: World, policy: PolicySettings, probes: ProbeActivities,
    book: policing.PolicyBook | None = None,
) -> Callable[[ToolCall], Any]:
    async def run_tool(call: ToolCall) -> ToolResult:
        return await run_guarded(spec, world, policy, probes, book, call)

    run_tool.__name__ = run_tool.__qualname__ = "tool_" + spec.name.replace(".", "_")
    return activity.defn(name=spec.name)(run_tool)


def tool_activities(
    world: World, catalogue: CatalogueSettings, policy: PolicySettings,
    book: policing.PolicyBook | None = None,
) -> dict[str, Callable[[ToolCall], Any]]:
    """Every tool of the deployment's ``catalogue`` as an activity, by its name, acting on
    ``world`` under ``policy``."""
    probes = ProbeActivities(world, catalogue)
    tools = registry_for(catalogue).tools
    book = book or policing.PolicyBook(policy, world.settings.scope, catalogue_of(catalogue))
    return {name: _make(spec, world, policy, probes, book) for name, spec in tools.items()}
