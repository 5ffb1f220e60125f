"""plangate: run agent plans on Temporal, every step guarded by read-only probes of the world.

The public surface, for your own tools and probes (an extension, loaded by
``PLANGATE_EXTENSIONS`` or the ``plangate.extensions`` entry-point group) and for Python code
that runs plans::

    from plangate import Contract, Effect, Reader, Term, ToolArgs, ToolError, tool
    from plangate import Plangate, RunEnded, UnknownRun  # running plans, and what to catch

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
    "tool": "plangate.activities.tools.registry",
    "ToolArgs": "plangate.activities.tools.registry",
    "CallContext": "plangate.activities.tools.registry",
    "Contract": "plangate.plans.catalogue",
    "Term": "plangate.plans.catalogue",
    "Reader": "plangate.plans.catalogue",
    "Writes": "plangate.plans.scope",
    "Reads": "plangate.plans.scope",
    "Effect": "plangate.plans.model",
    # declaring a probe
    "probe": "plangate.probes.registry",
    "ProbeArgs": "plangate.probes.registry",
    "ProbeContext": "plangate.probes.registry",
    "Verdict": "plangate.probes.registry",
    "NoRecord": "plangate.probes.registry",
    # the error a tool raises, and its codes
    "ToolError": "plangate.world.errors",
    "CODES": "plangate.records.codes",
    # the world context a tool or probe is handed, and an extension's registry
    "World": "plangate.world.clients",
    "Settings": "plangate.world.settings",
    "WorldSettings": "plangate.world.settings",
    "Registry": "plangate.activities.extensions",
    # running plans
    "Plangate": "plangate.client.api",
    "PlanError": "plangate.plans.load",
    # what a caller catches (plangate.errors draws the tree)
    "PlangateError": "plangate.errors",
    "ConfigurationError": "plangate.errors",
    "RunError": "plangate.errors",
    "ServiceUnreachable": "plangate.errors",
    "UnknownRun": "plangate.client.errors",
    "RunIdInUse": "plangate.client.errors",
    "RunEnded": "plangate.client.errors",
    "AnswerRefused": "plangate.client.errors",
    "NoApproverKey": "plangate.client.errors",
    "NoWorkerAnswered": "plangate.client.errors",
    "SearchAttributesMissing": "plangate.client.errors",
    # signed receipts of a run's effects: exported, and verified offline
    "receipts_of_run": "plangate.client.receipts",
    "verify_receipt": "plangate.records.receipts",
    "verify_receipts": "plangate.records.receipts",
    "ReceiptProblem": "plangate.records.receipts",
}

__all__ = [
    "CODES", "AnswerRefused", "CallContext", "ConfigurationError", "Contract", "Effect",
    "NoApproverKey", "NoRecord", "NoWorkerAnswered", "PlanError", "Plangate", "PlangateError",
    "ProbeArgs", "ProbeContext", "Reader", "Reads", "ReceiptProblem", "Registry", "RunEnded",
    "RunError",
    "RunIdInUse", "SearchAttributesMissing", "ServiceUnreachable", "Settings", "Term",
    "ToolArgs", "ToolError", "UnknownRun", "Verdict", "World", "WorldSettings", "Writes", "probe",
    "receipts_of_run", "tool", "verify_receipt", "verify_receipts",
]

if TYPE_CHECKING:
    from plangate.activities.extensions import Registry
    from plangate.activities.tools.registry import CallContext, ToolArgs, tool
    from plangate.client.api import Plangate
    from plangate.client.errors import (
        AnswerRefused,
        NoApproverKey,
        NoWorkerAnswered,
        RunEnded,
        RunIdInUse,
        SearchAttributesMissing,
        UnknownRun,
    )
    from plangate.client.receipts import receipts_of_run
    from plangate.errors import ConfigurationError, PlangateError, RunError, ServiceUnreachable
    from plangate.plans.catalogue import Contract, Reader, Term
    from plangate.plans.load import PlanError
    from plangate.plans.model import Effect
    from plangate.plans.scope import Reads, Writes
    from plangate.probes.registry import NoRecord, ProbeArgs, ProbeContext, Verdict, probe
    from plangate.records.codes import CODES
    from plangate.records.receipts import ReceiptProblem, verify_receipt, verify_receipts
    from plangate.world.clients import World
    from plangate.world.errors import ToolError
    from plangate.world.settings import Settings, WorldSettings


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'plangate' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public surface, loaded or not (the names load on first use)."""
    return sorted(set(globals()) | set(__all__))
