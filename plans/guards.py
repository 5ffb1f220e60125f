"""A plan with its guards resolved: for every step, the effect it runs as and the contract of
its tool, taken from the catalogue when the plan is submitted (or re-planned). The workflow is
handed this and nothing else, so what a running plan checks never changes with the tool
catalogue deployed when it replays.

The functions here bind a step's guards from its resolved arguments: pure, workflow-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from plans.catalogue import Catalogue, Contract, Term
from plans.model import Condition, Effect, Plan, Step

Phase = Literal["pre", "post"]


class StepGuard(BaseModel):
    model_config = ConfigDict(frozen=True)
    effect: Effect  # the effect the step runs as: never weaker than its tool's
    contract: Contract = Field(default_factory=Contract)
    reader: bool = False  # its tool can re-read its record: field probes fit it
    reads_by_key: bool = False  # ... by the call's idempotency key: an unknown outcome is readable


class GuardedPlan(BaseModel):
    model_config = ConfigDict(frozen=True)
    plan: Plan
    guards: dict[int, StepGuard]  # by step n
    systems: dict[str, str] = Field(default_factory=dict)  # probe name -> the system it reads

    def guard(self, n: int) -> StepGuard:
        return self.guards[n]


def guard(plan: Plan, catalogue: Catalogue) -> GuardedPlan:
    """The plan with each step's guards from ``catalogue`` (the plan is already valid)."""
    guards: dict[int, StepGuard] = {}
    for s in plan.steps:
        tool = catalogue.tools.get(s.tool)
        guards[s.n] = StepGuard(
            effect=catalogue.effect_of(s.tool, s.effect),
            contract=tool.contract if tool else Contract(),
            reader=bool(tool and tool.reader),
            reads_by_key=bool(tool and tool.reader and tool.reader.by_key),
        )
    return GuardedPlan(
        plan=plan, guards=guards,
        systems={name: p.system for name, p in catalogue.probes.items()},
    )


def _bind(terms: tuple[Term, ...], args: Mapping[str, Any]) -> list[Condition]:
    return [c for t in terms if (c := t.bind(args)) is not None]


def contract_conditions(g: StepGuard, phase: Phase, args: Mapping[str, Any]) -> list[Condition]:
    return _bind(g.contract.pre if phase == "pre" else g.contract.post, args)


def conditions_for(
    g: StepGuard, phase: Phase, args: Mapping[str, Any], plan_conditions: list[Condition]
) -> list[Condition]:
    """The contract's conditions bound from ``args`` (the step's resolved arguments), then the
    plan's own (already resolved), each claim once."""
    by_key: dict[str, Condition] = {}
    for c in [*contract_conditions(g, phase, args), *plan_conditions]:
        by_key[c.key()] = c  # the plan's copy wins: it may carry a wait
    return list(by_key.values())


def skip_evidence(g: StepGuard, args: Mapping[str, Any]) -> list[Condition]:
    """The contract's terms that identify this call's effect. A step may be skipped as already
    done only when these exist and hold (with every other post)."""
    return _bind((*(t for t in g.contract.post if t.identifies), *g.contract.done), args)


def steps_of(plan: GuardedPlan) -> list[tuple[Step, StepGuard]]:
    return [(s, plan.guards[s.n]) for s in plan.plan.steps]
