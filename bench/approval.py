"""Approval turnaround: from the approve Update's acceptance to the tool's start, the re-probe
the step makes after the approval included, p50 of 20; beside it, the same step with no card
(the workflow's read before the call to the tool's start: the call's dispatch alone), and the
check-to-use window of each (the read at the call to the tool's start).

    .venv/bin/python -m bench.approval [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from typing import Any

import boto3

from bench._stack import bench_stack
from bench.guard_cost import workflow_read_ms
from plangate.client.api import Plangate
from plangate.records.report import RunReport


def plan(bucket: str, approval: bool) -> dict[str, Any]:
    step: dict[str, Any] = {"n": 1, "tool": "s3.put",
                            "args": {"bucket": bucket, "key": f"r-{uuid.uuid4().hex[:8]}",
                                     "body": "figures"}}
    if approval:
        step["approval"] = "required"
    return {"goal": "publish", "budget": {"replans_max": 0}, "steps": [step]}


async def approve_when_asked(api: Plangate, run_id: str) -> float:
    """Approve the card once it waits: the approve call's wall time, in ms (signing the answer,
    the Update's validator verifying it, its acceptance)."""
    while True:
        rep = await api.report(run_id)
        pending = [a for a in rep.approvals if a.status == "pending"]
        if pending:
            began = time.perf_counter()
            await api.approve(run_id, pending[0].step, pending[0].digest, by="bench")
            return (time.perf_counter() - began) * 1000
        await asyncio.sleep(0.02)


def turnaround_ms(rep: RunReport) -> float:
    answered = rep.approvals[-1].answer
    started = rep.step(1).timings.tool_started_at
    if rep.status != "succeeded" or answered is None or started is None:
        raise SystemExit(f"run {rep.run_id} did not run after its approval: {rep.status}")
    return (started - answered.at).total_seconds() * 1000


def dispatch_ms(rep: RunReport) -> float:
    (ms,) = workflow_read_ms(rep)
    if rep.status != "succeeded":
        raise SystemExit(f"run {rep.run_id} did not run: {rep.status}")
    return ms


def check_to_use_ms(rep: RunReport) -> float:
    ms = rep.step(1).check_to_use_ms
    if ms is None:
        raise SystemExit(f"run {rep.run_id} has no check-to-use window")
    return ms


async def main(runs: int) -> None:
    async with bench_stack() as b:
        api = Plangate(b.client, b.settings)
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        s3 = boto3.client("s3", endpoint_url=b.settings.world.s3_endpoint_url)
        s3.create_bucket(Bucket=bucket)
        await api.result(await api.start(plan(bucket, False)))  # warm-up
        approved: list[float] = []
        calls: list[float] = []
        plain: list[float] = []
        windows: dict[str, list[float]] = {"approved": [], "no card": []}
        for _ in range(runs):
            run_id = await api.start(plan(bucket, True))
            calls.append(await approve_when_asked(api, run_id))
            rep = await api.result(run_id)
            approved.append(turnaround_ms(rep))
            windows["approved"].append(check_to_use_ms(rep))
            rep = await api.result(await api.start(plan(bucket, False)))
            plain.append(dispatch_ms(rep))
            windows["no card"].append(check_to_use_ms(rep))
    a, p = statistics.median(approved), statistics.median(plain)
    print(f"runs: {runs}")
    print(f"approve Update accepted -> tool started (re-probe included): p50 {a:.1f} ms, "
          f"max {max(approved):.1f} ms")
    print(f"no card: the workflow's read -> tool started:             p50 {p:.1f} ms, "
          f"max {max(plain):.1f} ms")
    print(f"approval turnaround / the call's dispatch: {a / p:.2f}")
    print(f"the approve call (sign, the validator's check, accepted): "
          f"p50 {statistics.median(calls):.1f} ms, max {max(calls):.1f} ms")
    for name, xs in windows.items():
        print(f"check-to-use (the read at the call -> tool started), {name}: "
              f"p50 {statistics.median(xs):.2f} ms, max {max(xs):.2f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    asyncio.run(main(ap.parse_args().runs))
