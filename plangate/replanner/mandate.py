"""What a re-planned plan may do: route forward from the world the completed steps left, within
the mandate the failed plan had. A proposal is untrusted input (OWASP LLM06, excessive agency):

- no ``money`` or ``external`` step whose tool and arguments were not in the failed remainder
  (each remainder step licenses one);
- no repeat of a completed ``write``, ``money`` or ``external`` step (same tool, same arguments);
- no remainder step it keeps or replaces loses its ``approval: required`` or runs as a weaker
  effect than it did (``_weakened``). Its own pre and post conditions may change: a re-plan
  routes around the check that failed. The tools' contracts and the deployment's scope are the
  deployment's, derived again for the new version: no plan can loosen them; and every money or
  external step of a re-planned version waits for a fresh card
  (``plans.guards.needs_approval``).

Arguments are compared with every value bound so far substituted, so ``${amount_eur}`` in the
remainder and ``612.4`` in the proposal are the same argument.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from plangate.plans.bindings import resolve
from plangate.plans.catalogue import Catalogue
from plangate.plans.model import Effect, Plan, Step
from plangate.plans.problem import Problem
from plangate.records.replan import ReplanRequest


def _identity(tool: str, args: Mapping[str, Any], bound: Mapping[str, Any]) -> str:
    resolved = resolve(dict(args), bound, strict=False)
    return f"{tool} {json.dumps(resolved, sort_keys=True, separators=(',', ':'))}"


def mandate_problems(plan: Plan, req: ReplanRequest, catalogue: Catalogue) -> list[Problem]:
    bound = req.bound

    def effect_of(s: Step) -> Effect:
        return catalogue.effect_of(s.tool, s.effect)

    licensed = Counter(
        _identity(s.tool, s.args, bound)
        for s in req.remaining
        if effect_of(s).outcome_must_be_known
    )
    done = {
        _identity(c.tool, c.args, bound): c.n for c in req.completed if c.effect.rank > 0
    }
    out: list[Problem] = []
    for name in ("on_behalf_of", "policy_bundle"):
        said, run = getattr(plan, name), getattr(req, name)
        if said is not None and said != run:
            out.append(Problem.at(
                None, name, f"{said!r}, but the run acts under {run!r}: a re-plan "
                "cannot change whose authority or which policy a run acts under"
            ))
    out += _weakened(plan, req, effect_of)
    for s in plan.steps:
        effect = effect_of(s)
        ident = _identity(s.tool, s.args, bound)
        if effect.rank > 0 and ident in done:
            out.append(Problem.at(
                s.n, "tool", f"repeats completed step {done[ident]} ({s.tool} with "
                "the same arguments): its effect is real; recovery is forward-only"
            ))
        if effect.outcome_must_be_known:
            if licensed[ident] > 0:
                licensed[ident] -= 1
            else:
                out.append(Problem.at(
                    s.n, "tool", f"a {effect} step ({s.tool} {_args(s)}) that was not "
                    "in the failed remainder: a re-plan may not add money or external effects"
                ))
    return out


def _counterparts(plan: Plan, req: ReplanRequest) -> list[tuple[Step, Step, bool]]:
    """Each proposed step paired with the remainder step it keeps (same tool, same arguments:
    True) or replaces (the first of the same tool not paired yet: False)."""
    bound = req.bound
    left = list(req.remaining)
    pairs: list[tuple[Step, Step, bool]] = []
    unpaired: list[Step] = []
    for s in plan.steps:
        ident = _identity(s.tool, s.args, bound)
        same = next((r for r in left if _identity(r.tool, r.args, bound) == ident), None)
        if same is None:
            unpaired.append(s)
            continue
        left.remove(same)
        pairs.append((s, same, True))
    for s in unpaired:
        other = next((r for r in left if r.tool == s.tool), None)
        if other is not None:
            left.remove(other)
            pairs.append((s, other, False))
    return pairs


def _weakened(
    plan: Plan, req: ReplanRequest, effect_of: Callable[[Step], Effect]
) -> list[Problem]:
    out: list[Problem] = []
    for s, r, kept in _counterparts(plan, req):
        what = "keeps" if kept else "replaces"
        was = f"remainder step {r.n} ({r.tool}), which it {what},"
        if r.approval == "required" and s.approval != "required":
            out.append(Problem.at(s.n, "approval", f"{was} waited for a person: a re-plan may "
                                  "not drop an approval"))
        if effect_of(s).rank < effect_of(r).rank:
            out.append(Problem.at(s.n, "effect", f"{effect_of(s)}, but {was} ran as "
                                  f"{effect_of(r)}: a re-plan may not weaken an effect"))
    return out


def _args(step: Step) -> str:
    text = json.dumps(step.args, sort_keys=True)
    return text if len(text) <= 120 else text[:119] + "…"
