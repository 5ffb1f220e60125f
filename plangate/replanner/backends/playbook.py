"""Deterministic recovery recipes, keyed by failure code: the cheap first line of re-planning.

A recipe sees the request and the failed step and returns the steps that clear the obstacle; the
playbook puts them in front of the remaining steps (the failed one first) and renumbers. The
completed steps are never repeated: they are not in ``remaining``, and ``${name}`` references
to what they bound are kept as written (``bound`` carries those values into the next version).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from plangate.plans.model import Budget, Condition, OnUnmet, Plan, Step
from plangate.plans.words import many
from plangate.records.replan import ReplanProposal, ReplanRequest

NAME = "playbook"


class NoRoute(Exception):
    """A recipe exists for the code but cannot apply to this failure."""


# A recipe: (request, failed step) -> steps to run before the remainder (numbered from 1, their
# depends_on among themselves). Raises NoRoute when it does not apply.
Recipe = Callable[[ReplanRequest, Step], list[Step]]


def _arg(step: Step, name: str) -> Any:
    if step.args.get(name) is None:
        raise NoRoute(f"the failed step {step.n} ({step.tool}) has no argument {name!r}")
    return step.args[name]


def _restore_archived(req: ReplanRequest, failed: Step) -> list[Step]:
    # An archived customer record refuses writes: restore it, and halt if it stays archived,
    # since without the record there is no route to the goal for a planner to find.
    return [
        Step(
            n=1,
            tool="customer.restore",
            args={"account_id": _arg(failed, "account_id")},
            post=[Condition(probe="field_equals", args={"path": "$.archived", "value": False})],
            on_unmet=OnUnmet.HALT,
        )
    ]


RECIPES: dict[str, Recipe] = {
    "record_archived": _restore_archived,
}


def _ordered_remaining(remaining: list[Step], failed: int) -> list[Step]:
    """The remaining steps, the failed one first, then in an order that respects depends_on
    (original order where it is free), so chaining them never inverts a dependency."""
    pending = [s for _, s in sorted(enumerate(remaining), key=lambda p: (p[1].n != failed, p[0]))]
    names = {s.n for s in pending}
    out: list[Step] = []
    placed: set[int] = set()
    while pending:
        for s in pending:
            if all(d in placed or d not in names for d in s.depends_on):
                break
        else:  # a cycle among the remaining steps: keep the given order, checks will report it
            s = pending[0]
        pending.remove(s)
        placed.add(s.n)
        out.append(s)
    return out


def splice(fix: list[Step], remaining: list[Step], failed: int) -> list[Step]:
    """``fix`` then the remaining steps, renumbered 1..N.

    Each remaining step depends on the step before it in the new plan (the remainder was written
    under assumptions no ``depends_on`` records, so it runs in order, after the fix), plus its
    own dependencies remapped to the new numbers. Dependencies on steps that are no longer in the
    plan (completed in an earlier version) are dropped: they are done.
    """
    ordered = _ordered_remaining(remaining, failed)
    new_n = {s.n: len(fix) + i + 1 for i, s in enumerate(ordered)}
    steps = list(fix)
    for s in ordered:
        n = new_n[s.n]
        deps = {new_n[d] for d in s.depends_on if d in new_n}
        if n > 1:
            deps.add(n - 1)
        steps.append(s.model_copy(update={"n": n, "depends_on": sorted(deps)}))
    return steps


class PlaybookBackend:
    name = NAME

    def __init__(self, recipes: dict[str, Recipe] | None = None) -> None:
        self.recipes = RECIPES if recipes is None else recipes

    async def propose(self, req: ReplanRequest) -> ReplanProposal:
        code = req.failure.code
        recipe = self.recipes.get(code)
        if recipe is None:
            return self._none(f"no playbook recipe for {code}")
        failed = next((s for s in req.remaining if s.n == req.failure.step), None)
        if failed is None:
            return self._none(
                f"recipe {code}: the failed step {req.failure.step} is not among the remaining"
            )
        try:
            fix = recipe(req, failed)
            plan = Plan(
                goal=req.goal,
                budget=Budget(replans_max=req.budget.replans_max),
                steps=splice(fix, req.remaining, failed.n),
            )
        except NoRoute as e:
            return self._none(f"recipe {code}: {e}")
        except ValidationError as e:
            found = many(e.error_count(), "problem")
            return self._none(f"recipe {code} built no valid plan: {found}")
        tools = ", ".join(s.tool for s in fix)
        return ReplanProposal(
            plan=plan,
            reason=f"recipe {code}: {tools}, then the {len(req.remaining)} remaining steps",
            backend=NAME,
        )

    @staticmethod
    def _none(reason: str) -> ReplanProposal:
        return ReplanProposal(plan=None, reason=reason, backend=NAME)
