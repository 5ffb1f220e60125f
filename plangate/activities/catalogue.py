"""The catalogue the plan language checks against and guards from: the deployment's tools
(``activities.extensions.registry_for``: the core tools, and the demo systems' where they are
on) and every probe (``plans.catalogue``); and the one way callers with settings validate a plan
with it (the work directory's paths, the deployment's scope)."""

from __future__ import annotations

import functools
from collections.abc import Collection

from plangate.activities.extensions import Registry, registry_for
from plangate.plans.catalogue import Catalogue
from plangate.plans.checking import lint, problems
from plangate.plans.guards import GuardedPlan, guard
from plangate.plans.load import PlanError
from plangate.plans.model import Plan
from plangate.world.paths import path_check
from plangate.world.settings import Settings


def catalogue(settings: Settings | None = None) -> Catalogue:
    """What a deployment with ``settings`` knows; None: the tools this process's environment
    turns on (``activities.extensions.registry_for``)."""
    return _catalogue(registry_for(settings))


@functools.cache
def _catalogue(registry: Registry) -> Catalogue:
    # a registry is sealed and cached per deployment: one catalogue each, however often asked
    return Catalogue(tools=dict(registry.tools), probes=dict(registry.probes))


def plan_problems(
    plan: Plan, settings: Settings, *, bound: Collection[str] = (), strict: bool = False
) -> list[str]:
    """Every problem of ``plan`` for this deployment; ``strict``: lint warnings are problems."""
    cat = catalogue(settings)
    found = problems(
        plan, cat, paths=path_check(settings.workdir), bound=bound, scope=settings.scope
    )
    if found or not strict:
        return found
    return [f"(strict) {w}" for w in lint(plan, cat)]


def check_plan(plan: Plan, settings: Settings) -> Plan:
    """``plan`` if it has no problem for this deployment, else ``PlanError`` naming each."""
    found = plan_problems(plan, settings)
    if found:
        raise PlanError(found)
    return plan


def guarded(plan: Plan, settings: Settings, *, replanned: bool = False) -> GuardedPlan:
    """The plan with its guards for this deployment: its tools' contracts and effects, and which
    steps wait for a person (``plans.guards.needs_approval``)."""
    return guard(
        plan, catalogue(settings), approve_effects=settings.approve_effects,
        approval_ttl_s=settings.approval_ttl_s, replanned=replanned,
    )
