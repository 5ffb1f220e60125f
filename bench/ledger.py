"""What the effect ledger costs a call (issue 34): the same tool through the same tool activity,
once as a money tool (its intent and outcome recorded in ``plangate.effects``) and once
declared a read (not recorded), alternating, on one embedded stack and one process.

Two tools: the demo's ``billing.issue_credit``, which acts in the deployment's Postgres (its
outcome commits in its own transaction: the intent, the mark and the answer, three round
trips), and a tool that does nothing outside (the intent and the outcome, two). Per call, the
added time is the recorded call minus the unrecorded one of the same round; p50 and p99 of
each, over ``--calls`` rounds.

    .venv/bin/python -m bench.ledger [--calls 400]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pydantic import JsonValue
from temporalio.testing import ActivityEnvironment

from bench._stack import bench_stack
from plangate.activities.extensions import registry_for
from plangate.activities.probe_activity import ProbeActivities
from plangate.activities.tool_activity import _make
from plangate.activities.tools.registry import CallContext, ToolSpec
from plangate.demo.schema import Account, seed_account
from plangate.plans.model import Effect
from plangate.records import keys
from plangate.records.calls import StepRef, ToolCall
from plangate.world.clients import World
from plangate.world.settings import PolicySettings


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _nothing(args: Any, world: World, ctx: CallContext) -> dict[str, JsonValue]:
    return {"ok": True}


async def measure(
    world: World, spec: ToolSpec[Any], probes: ProbeActivities, args: Callable[[], dict[str, Any]],
    calls: int,
) -> tuple[list[float], list[float]]:
    policy = PolicySettings(approve_effects=())  # nothing waits: the call alone is timed
    recorded = _make(replace(spec, effect=Effect.MONEY), world, policy, probes)
    plain = _make(replace(spec, effect=Effect.READ), world, policy, probes)
    env = ActivityEnvironment()
    run_id = f"bench-ledger-{uuid.uuid4().hex[:8]}"
    env.info = replace(env.info, workflow_id=run_id)
    out: dict[bool, list[float]] = {True: [], False: []}
    for i in range(calls + 10):
        for on in ((True, False) if i % 2 else (False, True)):
            call = ToolCall(
                step=StepRef(run_id=run_id, plan_version=1, n=i + 1, tool=spec.name,
                             args=args()),
                idempotency_key=keys.idempotency_key(run_id, uuid.uuid4().hex, f"v1/{i + 1}"),
            )
            t0 = time.perf_counter()
            await env.run(recorded if on else plain, call)
            if i >= 10:  # the first rounds warm the pool and the caches
                out[on].append((time.perf_counter() - t0) * 1000)
    return out[True], out[False]


def show(name: str, on: list[float], off: list[float]) -> None:
    added = [a - b for a, b in zip(on, off, strict=True)]
    print(f"{name} ({len(on)} calls each)")
    print(f"  recorded    p50 {pct(on, 0.5):6.2f} ms  p99 {pct(on, 0.99):6.2f} ms")
    print(f"  unrecorded  p50 {pct(off, 0.5):6.2f} ms  p99 {pct(off, 0.99):6.2f} ms")
    print(f"  added       p50 {statistics.median(added):6.2f} ms  p99 {pct(added, 0.99):6.2f} ms"
          f"  (recorded / unrecorded p50 {pct(on, 0.5) / pct(off, 0.5):.2f})")


async def main(calls: int) -> None:
    async with bench_stack() as b:
        probes = ProbeActivities(b.world, b.settings.catalogue)
        tools = registry_for(b.settings.catalogue).tools
        aid = f"acct_{uuid.uuid4().hex[:8]}"
        await seed_account(b.world, Account(aid, f"ar@{aid}.example", status="closed"))
        credit = tools["billing.issue_credit"]
        on, off = await measure(b.world, credit, probes,
                                lambda: {"account_id": aid, "amount_eur": 1.25}, calls)
        show("billing.issue_credit (acts in Postgres: the outcome in its own transaction)",
             on, off)
        nothing = replace(credit, fn=_nothing, reader=None)
        on, off = await measure(b.world, nothing, probes,
                                lambda: {"account_id": aid, "amount_eur": 1.25}, calls)
        show("a tool acting outside Postgres (intent and outcome)", on, off)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=400)
    asyncio.run(main(ap.parse_args().calls))
