"""The catalogue the plan language checks against and guards from: the deployment's tools
(``activities.extensions.registry_for``: the core tools, and the demo systems' where they are
on) and every probe (``plans.catalogue``); and the one way callers validate a plan with it: the
deployment's catalogue (``CatalogueSettings``), its work directory's paths and its scope
(``WorldSettings``), and for the guards, its approvals (``PolicySettings``)."""

from __future__ import annotations

import functools
from collections.abc import Collection

from plangate.activities.extensions import Registry, registry_for
from plangate.plans.catalogue import Catalogue
from plangate.plans.checking import lint, problems
from plangate.plans.guards import GuardedPlan, guard
from plangate.plans.load import PlanError
from plangate.plans.model import Plan
from plangate.plans.problem import Problem
from plangate.records.placement import Announced
from plangate.world.paths import path_check
from plangate.world.settings import CatalogueSettings, PolicySettings, WorldSettings


def catalogue(settings: CatalogueSettings) -> Catalogue:
    """What a deployment with ``settings`` knows (``activities.extensions.registry_for``)."""
    return _catalogue(registry_for(settings))


@functools.cache
def _catalogue(registry: Registry) -> Catalogue:
    # a registry is sealed and cached per deployment: one catalogue each, however often asked
    return Catalogue(tools=dict(registry.tools), probes=dict(registry.probes))


def announced(settings: CatalogueSettings) -> Announced:
    """The catalogue a deployment with ``settings`` announces and polls the queue of
    (``records.placement``)."""
    return _announced(registry_for(settings))


@functools.cache
def _announced(registry: Registry) -> Announced:
    return Announced.of(registry.tools, registry.probes)


def plan_problems(
    plan: Plan, cat: CatalogueSettings, world: WorldSettings, *,
    bound: Collection[str] = (), strict: bool = False,
) -> list[Problem]:
    """Every problem of ``plan`` for this deployment; ``strict``: lint warnings are problems."""
    known = catalogue(cat)
    found = problems(plan, known, paths=path_check(world.workdir), bound=bound, scope=world.scope)
    if found or not strict:
        return found
    return [w.strict() for w in lint(plan, known)]


def check_plan(plan: Plan, cat: CatalogueSettings, world: WorldSettings) -> Plan:
    """``plan`` if it has no problem for this deployment, else ``PlanError`` naming each."""
    found = plan_problems(plan, cat, world)
    if found:
        raise PlanError(found)
    return plan


def guarded(
    plan: Plan, cat: CatalogueSettings, policy: PolicySettings, *, replanned: bool = False
) -> GuardedPlan:
    """The plan with its guards for this deployment: its tools' contracts and effects, and which
    steps wait for a person (``plans.guards.needs_approval``)."""
    return guard(
        plan, catalogue(cat), approve_effects=policy.approve_effects,
        approval_ttl_s=policy.approval_ttl_s, replanned=replanned,
    )
