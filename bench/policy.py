"""What a policy decision costs a call (issue 36): ``Bundle.decide`` on the demo's credit call
(money, one resource, its arguments, observed values and totals in the context) with one
policy of the deployment's (a permissive base, beside plangate's 3 built-ins) and with 50 in all
(the base, the built-ins and 46 forbids on amounts, totals, tools, argument values and the
time, none of which holds, so each is evaluated), alternating, in one process. Real Cedar
evaluation (``cedarpy``); the bundle is parsed once, as a worker keeps it. p50 and p99 of each
over ``--calls`` decisions; the goal is at most 1 ms p50 with 50 policies.

Then a plan version's steps as the guards decide them (issue 50): ``bench.bare``'s steps
(``warehouse.run_sql`` marking a job each) decided one Cedar call a step against all in one
batch (``Bundle.decide_all``), for 10 and 31 steps, with ``bench.bare``'s guarded+policy bundle
and the 50; and at the call, the guards' decision taken again (``Bundle.recall``: the request
compared canonically) against Cedar deciding it again. p50 over ``--versions`` of each,
alternating.

    .venv/bin/python -m bench.policy [--calls 5000] [--versions 500]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from plangate.activities.catalogue import catalogue
from plangate.activities.policing import call_request
from plangate.plans.catalogue import Catalogue
from plangate.plans.model import Effect
from plangate.plans.scope import Scope
from plangate.records.policy import PolicyRequest, Totals
from plangate.world.policies import Bundle, bundle_of, cents, resources_of
from plangate.world.settings import CatalogueSettings, PolicySettings

BASE = '@id("base")\npermit(principal, action, resource);\n'
# bench.bare's guarded+policy deployment: the base and a cap on the call's amount
CAP = ('@id("cap")\nforbid(principal, action, resource)\n'
       'when { context.amount_cents > 100000 };\n')


def many(n: int) -> str:
    """``n`` forbids none of which holds for the measured call, so every one is evaluated."""
    kinds = [
        'forbid(principal, action == Plangate::Action::"money", resource) '
        "when {{ context.amount_cents > {k}00000 }};",
        'forbid(principal, action, resource) when {{ context.totals.amount_cents_hour + '
        "context.amount_cents > {k}000000 }};",
        'forbid(principal, action, resource) when {{ resource.tool == "tool-{k}" }};',
        'forbid(principal, action, resource) when {{ context.args has account_id && '
        'context.args.account_id == "acct_{k}" }};',
        'forbid(principal, action, resource) when {{ context.now.hour == 30 && '
        "context.now.minute == {k} }};",
    ]
    return "\n".join(f'@id("p{k}")\n' + kinds[k % len(kinds)].format(k=k + 20)
                     for k in range(n))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def version(steps: int, cat: Catalogue) -> list[PolicyRequest]:
    """The requests of a plan version as the guards put them: ``bench.bare``'s steps."""
    tool = "warehouse.run_sql"
    return [call_request(tool, cat.tools[tool], Effect.WRITE,
                         {"statement": "set_job_state",
                          "params": {"job_id": f"bench-{n}", "state": "done"}}, "dana")
            for n in range(1, steps + 1)]


def p50s(rounds: int, kinds: dict[str, Callable[[], object]]) -> dict[str, float]:
    """p50 (ms) of each kind, called in turn ``rounds`` times after 20 warm-ups."""
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for i in range(rounds + 20):
        for name in (list(kinds) if i % 2 else list(reversed(kinds))):
            t0 = time.perf_counter()
            kinds[name]()
            if i >= 20:
                times[name].append((time.perf_counter() - t0) * 1000)
    return {k: pct(t, 0.5) for k, t in times.items()}


def versions(rounds: int, cat: Catalogue, bundles: dict[str, Bundle]) -> None:
    """A plan version's steps one Cedar call each against one batch; the call's recall
    against deciding again."""
    print(f"\n# a plan version's steps ({rounds} versions each, alternating; p50 ms)")
    print(f"{'bundle':22} {'steps':>5} {'single':>8} {'batch':>8} {'single/batch':>13}")
    for name, b in bundles.items():
        for steps in (10, 31):
            asked = version(steps, cat)
            assert b.decide_all(asked) == [b.decide(r) for r in asked]
            t = p50s(rounds, {"single": lambda: [b.decide(r) for r in asked],  # noqa: B023
                              "batch": lambda: b.decide_all(asked)})  # noqa: B023
            print(f"{name:22} {steps:5} {t['single']:8.3f} {t['batch']:8.3f} "
                  f"{t['single'] / t['batch']:12.2f}x")
    print(f"\n# at the call: the guards' decision recalled, or decided again "
          f"({rounds * 10} calls each; p50 ms)")
    print(f"{'bundle':22} {'decide':>8} {'recall':>8} {'decide/recall':>14}")
    for name, b in bundles.items():
        if not b.recalls:
            print(f"{name:22} (its policies read the time or totals: decided at each call)")
            continue
        (r,) = version(1, cat)
        b.remember(r, b.decide(r))
        at_call = r.model_copy(update={"now": datetime.now(UTC)})
        assert b.recall(at_call) == b.decide(at_call)
        t = p50s(rounds * 10, {"decide": lambda: b.decide(at_call),  # noqa: B023
                               "recall": lambda: b.recall(at_call)})  # noqa: B023
        print(f"{name:22} {t['decide']:8.3f} {t['recall']:8.3f} "
              f"{t['decide'] / t['recall']:13.2f}x")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=5000)
    p.add_argument("--versions", type=int, default=500)
    parsed = p.parse_args()
    calls = parsed.calls
    cat = catalogue(CatalogueSettings(demo_systems=True))
    policy = PolicySettings(approve_effects=(Effect.MONEY,), policies=Path("/bench"))
    one = bundle_of([("base.cedar", BASE.encode())], policy, Scope(), cat)
    fifty = bundle_of([("base.cedar", BASE.encode()), ("many.cedar", many(46).encode())],
                      policy, Scope(), cat)
    tool = "billing.issue_credit"
    args = {"account_id": "acct_7a01c", "amount_eur": 750.5}
    request = PolicyRequest(
        principal="dana", submitter="agent-7", tool=tool, effect=Effect.MONEY,
        resources=resources_of(tool, cat.tools[tool], args), args=args,
        amount_cents=cents(750.5), observed={"field_present($.credit_id)": False},
        now=datetime.now(UTC), totals=Totals(amount_cents_hour=120_000, calls_hour=3),
    )
    bundles: dict[str, Bundle] = {"1 policy (+3 built-in)": one, "50 policies": fifty}
    assert len(fifty.policies) == 50, len(fifty.policies)
    for name, b in bundles.items():
        d = b.decide(request)
        assert d.outcome.value == "permit_with_people", (name, d)
        print(f"# {name}: {len(b.policies)} policies in {b.bundle}; decides "
              f"{d.outcome.value} by {', '.join(d.policies)}")
    times: dict[str, list[float]] = {n: [] for n in bundles}
    for i in range(calls + 200):
        for name in (list(bundles) if i % 2 else list(reversed(bundles))):
            t0 = time.perf_counter()
            bundles[name].decide(request)
            if i >= 200:  # warm-up left out
                times[name].append((time.perf_counter() - t0) * 1000)
    print(f"{'':22} {'p50 ms':>8} {'p99 ms':>8}   ({calls} decisions each, alternating)")
    for name, t in times.items():
        print(f"{name:22} {pct(t, 0.5):8.3f} {pct(t, 0.99):8.3f}")
    few, all_ = (pct(times[n], 0.5) for n in bundles)
    print(f"50 policies / 1: {all_ / few:.2f}x at p50; goal at most 1 ms p50 with 50: "
          f"{'met' if all_ <= 1.0 else 'NOT met'}")
    capped = bundle_of([("base.cedar", BASE.encode()), ("cap.cedar", CAP.encode())],
                       policy, Scope(), cat)
    versions(parsed.versions, cat, {"guarded+policy (bare)": capped, "50 policies": fifty})


if __name__ == "__main__":
    main()
