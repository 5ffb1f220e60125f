"""The staleness report over 1,000 finished runs: how long ``plangate report`` takes to list
them through visibility and fetch their reports, and to compute and render the report, side by
side in one run.

    .venv/bin/python -m bench.report [--runs 1000] [--rounds 3]

Each run is a one-step plan (a job row written, then read back) written an hour before it
runs. Fetching is Temporal round trips (a list page per 1,000, one result per run, 32 at once);
computing is this process alone.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._stack import Bench, bench_stack
from plangate.client import reporting
from plangate.client.staleness import per_tool
from plangate.client.staleness_html import page


def plan(made_at: datetime) -> dict[str, Any]:
    job = f"rep-{uuid.uuid4().hex[:10]}"
    return {"goal": "report bench", "budget": {"replans_max": 0},
            "made_at": made_at.isoformat(), "steps": [
                {"n": 1, "tool": "warehouse.run_sql",
                 "args": {"statement": "set_job_state",
                          "params": {"job_id": job, "state": "done"}},
                 "post": [{"probe": "job_state", "job_id": job, "want": "done"}]}]}


async def finish(b: Bench, runs: int) -> None:
    made = datetime.now(UTC) - timedelta(hours=1)
    for start in range(0, runs, 50):
        reps = await asyncio.gather(*(b.run(plan(made)) for _ in range(min(50, runs - start))))
        bad = [r.run_id for r in reps if r.status != "succeeded"]
        if bad:
            raise SystemExit(f"{len(bad)} runs did not succeed: {bad[:3]}")


async def main(runs: int, rounds: int) -> None:
    async with bench_stack() as b:
        since = datetime.now(UTC) - timedelta(minutes=1)
        t0 = time.perf_counter()
        await finish(b, runs)
        made_s = time.perf_counter() - t0
        for _ in range(600):  # visibility catches up with the last closes
            listed = await reporting.finished_runs(b.client, since, b.settings.temporal.task_queue)
            if len(listed) >= runs:
                break
            await asyncio.sleep(0.1)
        fetch: list[float] = []
        compute: list[float] = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            found = await reporting.finished_runs(b.client, since, b.settings.temporal.task_queue)
            fetch.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            tools = per_tool(found)
            reporting.text(tools, len(found), since)
            page(tools, len(found), since)
            compute.append(time.perf_counter() - t0)
    f, c = statistics.median(fetch), statistics.median(compute)
    print(f"{len(found)} finished runs ({made_s:.0f} s to make them), {rounds} rounds")
    print(f"fetch (visibility list + one result each): median {f:.2f} s "
          f"{[round(x, 2) for x in fetch]}, {len(found) / f:.0f} runs/s")
    print(f"compute and render (text and HTML):        median {c * 1000:.0f} ms "
          f"{[round(x * 1000) for x in compute]}")
    print(f"whole report: {f + c:.2f} s; fetch/compute: {f / c:.0f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    asyncio.run(main(a.runs, a.rounds))
