"""plangate: run agent plans on Temporal, every step guarded by read-only probes of the world.

The public surface, for your own tools and probes (an extension, loaded by
``PLANGATE_EXTENSIONS`` or the ``plangate.extensions`` entry-point group) and for Python code
that runs plans::

    from plangate import Contract, Effect, Reader, Term, ToolArgs, ToolError, tool

    class GetTicket(ToolArgs):
        ticket_id: str

    @tool("tickets.get", GetTicket, Effect.READ)
    async def get_ticket(args, world, call): ...

Everything else is plangate's own and may change. Names load on first use, so ``import
plangate`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    # declaring a tool: its argument model, effect, contract, reader, what it reads and writes
    "tool": "activities.tools.registry",
    "ToolArgs": "activities.tools.registry",
    "CallContext": "activities.tools.registry",
    "Contract": "plans.catalogue",
    "Term": "plans.catalogue",
    "Reader": "plans.catalogue",
    "Writes": "plans.scope",
    "Reads": "plans.scope",
    "Effect": "plans.model",
    # declaring a probe
    "probe": "probes.registry",
    "ProbeArgs": "probes.registry",
    "ProbeContext": "probes.registry",
    "Verdict": "probes.registry",
    "NoRecord": "probes.registry",
    # the error a tool raises, and its codes
    "ToolError": "world.errors",
    "CODES": "records.codes",
    # the world context a tool or probe is handed, and an extension's registry
    "World": "world.clients",
    "Settings": "world.settings",
    "Registry": "activities.extensions",
    # running plans
    "Plangate": "plangate.api",
    "PlanError": "plans.load",
}

__all__ = [
    "CODES", "CallContext", "Contract", "Effect", "NoRecord", "PlanError", "Plangate",
    "ProbeArgs", "ProbeContext", "Reader", "Reads", "Registry", "Settings", "Term", "ToolArgs",
    "ToolError", "Verdict", "World", "Writes", "probe", "tool",
]

if TYPE_CHECKING:
    from activities.extensions import Registry
    from activities.tools.registry import CallContext, ToolArgs, tool
    from plangate.api import Plangate
    from plans.catalogue import Contract, Reader, Term
    from plans.load import PlanError
    from plans.model import Effect
    from plans.scope import Reads, Writes
    from probes.registry import NoRecord, ProbeArgs, ProbeContext, Verdict, probe
    from records.codes import CODES
    from world.clients import World
    from world.errors import ToolError
    from world.settings import Settings


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'plangate' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
