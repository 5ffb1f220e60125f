"""The catalogue the plan language checks against and guards from: every registered tool and
probe (``plans.catalogue``), filled from the registries; and the one way callers with settings
validate a plan with it (the work directory's paths, the deployment's scope)."""

from __future__ import annotations

from collections.abc import Collection

from activities.tools import TOOLS
from plans.catalogue import Catalogue
from plans.checking import lint, problems
from plans.load import PlanError
from plans.model import Plan
from probes import PROBES
from world.paths import path_check
from world.settings import Settings


def catalogue() -> Catalogue:
    return Catalogue(tools=dict(TOOLS), probes=dict(PROBES))


def plan_problems(
    plan: Plan, settings: Settings, *, bound: Collection[str] = (), strict: bool = False
) -> list[str]:
    """Every problem of ``plan`` for this deployment; ``strict``: lint warnings are problems."""
    cat = catalogue()
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
