"""A plan with its guards resolved: for every step, the effect it runs as and the contract of
its tool, taken from the catalogue when the plan is submitted (or re-planned). The workflow is
handed this and nothing else, so what a running plan checks never changes with the tool
catalogue deployed when it replays.

The functions here bind a step's guards from its resolved arguments: pure, workflow-safe.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from plangate.plans import limits
from plangate.plans._base import Model
from plangate.plans.catalogue import Catalogue, Contract, Term, VersionBinding
from plangate.plans.model import Condition, Effect, Plan, Step

Phase = Literal["pre", "post"]


DEFAULT_APPROVAL_TTL_S = 24 * 3600.0


class PolicyMark(Model):
    """What the deployment's Cedar policies decided of a step when its version's guards were
    derived (``records.policy.Decision``, as a step's report and its card show it)."""

    model_config = ConfigDict(frozen=True, defer_build=True)
    bundle: str
    outcome: str  # permit, forbid, permit_with_people
    policies: tuple[str, ...] = ()  # the determining policies' ids
    approvers: int = 0  # distinct approvers asked for (permit_with_people)
    decided_at: datetime
    enforced: bool = True  # False in shadow mode
    reason: str = ""


class StepGuard(Model):
    model_config = ConfigDict(frozen=True, defer_build=True)
    effect: Effect  # the effect the step runs as: never weaker than its tool's
    contract: Contract = Field(default_factory=Contract)
    reader: bool = False  # its tool can re-read its record: field probes fit it
    reads_by_key: bool = False  # ... by the call's idempotency key: an unknown outcome is readable
    approval: bool = False  # a person approves its card before the call
    version: VersionBinding | None = None  # its write carries the version its probe observed
    policy: PolicyMark | None = None  # the policies' decision (only with PLANGATE_POLICIES)


class GuardedPlan(Model):
    model_config = ConfigDict(frozen=True, defer_build=True)
    plan: Plan
    # by step n; a client sends none: the worker derives them (``activities.guarding``), and
    # never reads what an input says they are
    guards: dict[int, StepGuard] = Field(default_factory=dict)
    systems: dict[str, str] = Field(default_factory=dict)  # probe name -> the system it reads
    approval_ttl_s: float = DEFAULT_APPROVAL_TTL_S  # how long a card stays valid

    def guard(self, n: int) -> StepGuard:
        return self.guards[n]


def guard(
    plan: Plan,
    catalogue: Catalogue,
    *,
    approve_effects: Collection[Effect] = (),
    approval_ttl_s: float = DEFAULT_APPROVAL_TTL_S,
    replanned: bool = False,
) -> GuardedPlan:
    """The plan with each step's guards from ``catalogue`` (the plan is already valid). A step
    needs a person when the strongest word says so: the plan's (``approval: required``), the
    deployment's (its effect is in ``approve_effects``) or its tool's own; and, in a
    ``replanned`` version, every money or external step (a card never carries across plan
    versions). A card lives the shorter of the plan's ``approval_ttl_s`` and the setting's
    (a plan may ask for less, never more), and never past the language's 7 days."""
    guards: dict[int, StepGuard] = {}
    for s in plan.steps:
        tool = catalogue.tools.get(s.tool)
        effect = catalogue.effect_of(s.tool, s.effect)
        guards[s.n] = StepGuard(
            effect=effect,
            contract=tool.contract if tool else Contract(),
            reader=bool(tool and tool.reader),
            reads_by_key=bool(tool and tool.reader and tool.reader.by_key),
            approval=needs_approval(
                said=s.approval == "required", effect=effect, approve_effects=approve_effects,
                tool_says=bool(tool and tool.approval), replanned=replanned,
            ),
            version=tool.version if tool else None,
        )
    return GuardedPlan(
        plan=plan, guards=guards,
        systems={name: p.system for name, p in catalogue.probes.items()},
        approval_ttl_s=min(
            plan.approval_ttl_s or approval_ttl_s, approval_ttl_s, limits.MAX_WAIT_TIMEOUT_S
        ),
    )


def needs_approval(
    *, said: bool, effect: Effect, approve_effects: Collection[Effect], tool_says: bool,
    replanned: bool,
) -> bool:
    """Whether a call waits for a person: the strongest of every word on it. Asked where the
    guards are derived and again by the tool's activity before it acts."""
    return (
        said or tool_says or effect in approve_effects
        or (replanned and effect.outcome_must_be_known)
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


def step_conditions(
    g: StepGuard, args: Mapping[str, Any], plan_pre: list[Condition], plan_post: list[Condition]
) -> tuple[list[Condition], list[Condition]]:
    """A step's pre and post conditions from its resolved arguments and its plan's own (already
    resolved): the contract's, the plan's, and the version its write will carry."""
    pre = conditions_for(g, "pre", args, plan_pre)
    post = conditions_for(g, "post", args, plan_post)
    version = version_condition(g, args)
    if version is not None and version.key() not in {c.key() for c in pre}:
        pre = [*pre, version]
    return pre, post


def skip_check(
    step: Step, g: StepGuard, args: Mapping[str, Any], post: list[Condition]
) -> list[Condition]:
    """What must hold before the call for the step to be skipped as already done: every post
    condition and the tool's evidence that *this* call's effect is in place. Nothing when the
    step cannot be skipped (a read, a step that binds values, no such evidence)."""
    if g.effect.rank == 0 or step.binds:
        return []
    evidence = skip_evidence(g, args)
    if not evidence:
        return []
    keys = {c.key() for c in post}
    return post + [c for c in evidence if c.key() not in keys]


def steps_of(plan: GuardedPlan) -> list[tuple[Step, StepGuard]]:
    return [(s, plan.guards[s.n]) for s in plan.plan.steps]


def version_condition(g: StepGuard, args: Mapping[str, Any]) -> Condition | None:
    """The pre condition that observes the version this step's write will carry, unless the
    plan chose the version itself (or the tool has none)."""
    v = g.version
    if v is None or any(args.get(a) is not None for a in (v.arg, *v.set_by)):
        return None
    return v.term.bind(args)


def with_version(
    g: StepGuard, args: dict[str, Any], observed: Any
) -> dict[str, Any]:
    """``args`` with the version the probe observed (or, when it saw no such resource, the
    arguments for that case)."""
    v = g.version
    if v is None:
        return args
    if isinstance(observed, dict) and observed.get("absent"):
        return {**args, **v.when_absent}
    value = observed.get(v.observed) if isinstance(observed, dict) and v.observed else observed
    if value is None:
        return args
    return {**args, v.arg: value}
