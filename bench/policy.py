"""What a policy decision costs a call (issue 36): ``Bundle.decide`` on the demo's credit call
(money, one resource, its arguments, observed values and totals in the context) with one
policy of the deployment's (a permissive base, beside plangate's 3 built-ins) and with 50 in all
(the base, the built-ins and 46 forbids on amounts, totals, tools, argument values and the
time, none of which holds, so each is evaluated), alternating, in one process. Real Cedar
evaluation (``cedarpy``); the bundle is parsed once, as a worker keeps it. p50 and p99 of each
over ``--calls`` decisions; the goal is at most 1 ms p50 with 50 policies.

    .venv/bin/python -m bench.policy [--calls 5000]
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from pathlib import Path

from plangate.activities.catalogue import catalogue
from plangate.plans.model import Effect
from plangate.plans.scope import Scope
from plangate.records.policy import PolicyRequest, Totals
from plangate.world.policies import Bundle, bundle_of, cents, resources_of
from plangate.world.settings import CatalogueSettings, PolicySettings

BASE = '@id("base")\npermit(principal, action, resource);\n'


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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=5000)
    calls = p.parse_args().calls
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


if __name__ == "__main__":
    main()
