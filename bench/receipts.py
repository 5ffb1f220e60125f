"""What a signed receipt costs a ledgered call (issue 51): the same recorded tool through the
same tool activity, once on a worker with a receipt key (the receipt made, signed with Ed25519
and written to ``plangate.receipts``: one more round trip) and once without, alternating, on one
embedded stack and one process. Per call, the added time is the receipted call minus the other
of the same round; p50 and p99 over ``--calls`` rounds, and the receipts' size.

    .venv/bin/python -m bench.receipts [--calls 400]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from dataclasses import replace
from typing import Any

from pydantic import JsonValue
from temporalio.testing import ActivityEnvironment

from bench._stack import bench_stack
from bench.ledger import pct
from plangate.activities.extensions import registry_for
from plangate.activities.probe_activity import ProbeActivities
from plangate.activities.tool_activity import _make
from plangate.activities.tools.registry import CallContext
from plangate.records import keys
from plangate.records.calls import StepRef, ToolCall, ToolResult
from plangate.records.receipts import line
from plangate.records.signing import SigningKey
from plangate.world.clients import World
from plangate.world.settings import PolicySettings


async def _nothing(args: Any, world: World, ctx: CallContext) -> dict[str, JsonValue]:
    return {"ok": True}


async def main(calls: int) -> None:
    async with bench_stack() as b:
        probes = ProbeActivities(b.world, b.settings.catalogue)
        spec = replace(registry_for(b.settings.catalogue).tools["billing.issue_credit"],
                       fn=_nothing, reader=None)
        plain = PolicySettings(approve_effects=())  # nothing waits: the call alone is timed
        signing = replace(plain, receipt_key=SigningKey.generate("bench-worker"))
        with_receipt = _make(spec, b.world, signing, probes)
        without = _make(spec, b.world, plain, probes)
        env = ActivityEnvironment()
        run_id = f"bench-receipts-{uuid.uuid4().hex[:8]}"
        env.info = replace(env.info, workflow_id=run_id)
        out: dict[bool, list[float]] = {True: [], False: []}
        sizes: list[int] = []
        for i in range(calls + 10):
            for signed in ((True, False) if i % 2 else (False, True)):
                call = ToolCall(
                    step=StepRef(run_id=run_id, plan_version=1, n=i + 1, tool=spec.name,
                                 args={"account_id": "acct_bench", "amount_eur": 1.25}),
                    idempotency_key=keys.idempotency_key(run_id, uuid.uuid4().hex,
                                                         f"v1/{i + 1}"),
                )
                t0 = time.perf_counter()
                result: ToolResult = await env.run(with_receipt if signed else without, call)
                if i >= 10:  # the first rounds warm the pool and the caches
                    out[signed].append((time.perf_counter() - t0) * 1000)
                if signed and result.receipt is not None:
                    sizes.append(len(line(result.receipt).encode()))
        on, off = out[True], out[False]
        added = [a - b for a, b in zip(on, off, strict=True)]
        print(f"a money tool acting outside Postgres ({len(on)} calls each)")
        print(f"  receipted   p50 {pct(on, 0.5):6.2f} ms  p99 {pct(on, 0.99):6.2f} ms")
        print(f"  no receipt  p50 {pct(off, 0.5):6.2f} ms  p99 {pct(off, 0.99):6.2f} ms")
        print(f"  added       p50 {statistics.median(added):6.2f} ms  p99 {pct(added, 0.99):6.2f}"
              f" ms  (receipted / not p50 {pct(on, 0.5) / pct(off, 0.5):.2f})")
        print(f"  receipt size: median {statistics.median(sizes):.0f} bytes")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=400)
    asyncio.run(main(ap.parse_args().calls))
