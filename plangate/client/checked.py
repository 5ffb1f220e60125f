"""A plan checked for one deployment: what ``plangate check`` and ``Plangate.check`` return and
``Plangate.start`` takes as it is. Loads no Temporal client: a check needs no server."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plangate.plans.checking import lint
from plangate.plans.load import PlanError, load_file, load_text, parse_plan
from plangate.plans.model import Plan
from plangate.plans.problem import Problem
from plangate.world.settings import Settings

PlanSource = Plan | Mapping[str, Any] | str | Path
"""What ``check`` reads: a plan model, a dict, a file path (JSON or YAML) or JSON text."""


@dataclass(frozen=True)
class Checked:
    """A plan checked for one deployment (``check``): ``start`` takes it as it is, not checking
    it again when its client has the same settings. The worker checks it whatever the client did."""

    plan: Plan
    warnings: list[Problem]
    settings: Settings = field(repr=False, compare=False)


_KINDS = {"NoneType": "null", "bool": "true or false", "int": "a number", "float": "a number",
          "list": "a list", "tuple": "a list", "bytes": "bytes"}


def load(source: PlanSource) -> Plan:
    """A plan from a model, a dict, a file path (JSON or YAML), or JSON text (a string that
    starts with ``{``)."""
    if isinstance(source, Plan):
        return source
    if isinstance(source, str) and source.lstrip().startswith("{"):
        return load_text(source)
    if isinstance(source, str | Path):
        return load_file(source)
    if not isinstance(source, Mapping):
        name = type(source).__name__
        kind = _KINDS.get(name, f"a {name}")
        raise PlanError([Problem.plan(f"a plan is an object with goal and steps, not {kind}")])
    return parse_plan(dict(source))


def check(source: PlanSource, settings: Settings, *, strict: bool = False) -> Checked:
    """Validate and lint; ``PlanError`` names every problem (with ``strict``, every lint
    warning too). Needs no server; starts nothing."""
    from plangate.activities.catalogue import catalogue, check_plan, plan_problems

    try:
        plan = check_plan(load(source), settings.catalogue, settings.world)
    except PlanError as e:
        if e.partial is None:
            raise
        # the steps that parsed are checked too: every problem in one answer, not in stages
        seen = set(e.problems)
        more = [
            p for p in plan_problems(e.partial.plan, settings.catalogue, settings.world)
            if e.partial.checked(p) and p not in seen
        ]
        raise PlanError([*e.problems, *more]) from None
    refused = policy_refusal(plan, settings)
    if refused is not None:
        raise PlanError([Problem.at(refused[0], None, f"policy_denied (403): {refused[1]}")])
    warnings = lint(plan, catalogue(settings.catalogue))
    if strict and warnings:
        raise PlanError([w.strict() for w in warnings])
    return Checked(plan, warnings, settings)


def policy_refusal(plan: Plan, settings: Settings) -> tuple[int, str] | None:
    """Where this client knows the deployment's Cedar policies (``PLANGATE_POLICIES``): why
    they forbid a step of ``plan`` as written, and which (the worker decides again at the start
    and at each call, bound), or None."""
    if settings.policy.policies is None:
        return None
    from plangate.activities.catalogue import catalogue, guarded
    from plangate.activities.guarding import decided
    from plangate.world.policies import load_bundle

    cedar = load_bundle(settings.policy, settings.world.scope, catalogue(settings.catalogue))
    guards = guarded(plan, settings.catalogue, settings.policy).guards
    return decided(plan, guards, settings.catalogue, cedar, plan.on_behalf_of)[1]


def checked(source: Checked | PlanSource, settings: Settings) -> Checked:
    """``source`` as checked for ``settings``: a ``Checked`` of the same settings as it is,
    anything else through ``check``."""
    if isinstance(source, Checked) and source.settings == settings:
        return source
    return check(source.plan if isinstance(source, Checked) else source, settings)
