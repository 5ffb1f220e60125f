"""Approval turnaround: from the approve Update's acceptance to the tool's start, the re-probe
the step makes after the approval included, p50 of 20; beside it, the same step with no card
(its pre-check read to the tool's start).

    .venv/bin/python -m bench.approval [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import uuid
from typing import Any

import boto3

from bench._stack import bench_stack
from plangate.api import Plangate
from records.report import RunReport


def plan(bucket: str, approval: bool) -> dict[str, Any]:
    step: dict[str, Any] = {"n": 1, "tool": "s3.put",
                            "args": {"bucket": bucket, "key": f"r-{uuid.uuid4().hex[:8]}",
                                     "body": "figures"}}
    if approval:
        step["approval"] = "required"
    return {"goal": "publish", "budget": {"replans_max": 0}, "steps": [step]}


async def approve_when_asked(api: Plangate, run_id: str) -> None:
    while True:
        rep = await api.report(run_id)
        pending = [a for a in rep.approvals if a.status == "pending"]
        if pending:
            await api.approve(run_id, pending[0].step, pending[0].digest, by="bench")
            return
        await asyncio.sleep(0.02)


def turnaround_ms(rep: RunReport) -> float:
    answered = rep.approvals[-1].answer
    started = rep.step(1).timings.tool_started_at
    if rep.status != "succeeded" or answered is None or started is None:
        raise SystemExit(f"run {rep.run_id} did not run after its approval: {rep.status}")
    return (started - answered.at).total_seconds() * 1000


def dispatch_ms(rep: RunReport) -> float:
    ms = rep.step(1).check_to_use_ms
    if rep.status != "succeeded" or ms is None:
        raise SystemExit(f"run {rep.run_id} did not run: {rep.status}")
    return ms


async def main(runs: int) -> None:
    async with bench_stack() as b:
        api = Plangate(b.client, b.settings)
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        boto3.client("s3", endpoint_url=b.settings.s3_endpoint_url).create_bucket(Bucket=bucket)
        await api.result(await api.start(plan(bucket, False)))  # warm-up
        approved: list[float] = []
        plain: list[float] = []
        for _ in range(runs):
            run_id = await api.start(plan(bucket, True))
            await approve_when_asked(api, run_id)
            approved.append(turnaround_ms(await api.result(run_id)))
            plain.append(dispatch_ms(await api.result(await api.start(plan(bucket, False)))))
    a, p = statistics.median(approved), statistics.median(plain)
    print(f"runs: {runs}")
    print(f"approve Update accepted -> tool started (re-probe included): p50 {a:.1f} ms, "
          f"max {max(approved):.1f} ms")
    print(f"no card: pre-check read -> tool started:                  p50 {p:.1f} ms, "
          f"max {max(plain):.1f} ms")
    print(f"approval turnaround / plain check-to-use: {a / p:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    asyncio.run(main(ap.parse_args().runs))
