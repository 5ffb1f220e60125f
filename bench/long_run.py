"""Long runs and continue-as-new: the history a plan run makes per step, in one history and in
segments under the bound, and a day-long wait read every 10 s.

1. A 1,000-step plan (each step: a write, its post check) on the embedded dev server, under
   the default bound (10,240 events, 10 MiB; the dev server suggests continuing as new at about
   4,100 events, and the run follows it): the events and bytes of all its runs (what one
   history would have to hold) and of the longest.
2. A post wait of 24 hours read every 10 s on the time-skipping test server, the job done
   10 minutes before the deadline, under the default bound.

    .venv/bin/python -m bench.long_run [--steps 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from bench._stack import bench_stack
from plangate.records.report import RunReport
from plangate.testing import chain, running_worker
from plangate.worker.encryption import data_converter
from plangate.world.settings import Settings

MIB = 1024 * 1024


@dataclass
class Segments:
    events: list[int]
    bytes: list[int]

    def line(self, per: int, what: str) -> str:
        e, b = sum(self.events), sum(self.bytes)
        return (
            f"{len(self.events)} segment(s), {e:,} events, {b / MIB:.2f} MiB in all; "
            f"{e / per:.1f} events and {b / per / 1024:.2f} KiB per {what}; longest segment "
            f"{max(self.events):,} events, {max(self.bytes) / MIB:.2f} MiB"
        )


async def segments(client: Client, run_id: str) -> Segments:
    runs = await chain(client, run_id)
    return Segments([len(r) for r in runs], [sum(e.ByteSize() for e in r) for r in runs])


def long_plan(tag: str, n: int) -> dict[str, Any]:
    # short ids: a thousand steps must fit a plan's 256 KiB
    steps = [
        {"n": i, "tool": "warehouse.run_sql", "depends_on": [i - 1] if i > 1 else [],
         "args": {"statement": "set_job_state", "params": {"job_id": f"{tag}{i}", "state": "done"}},
         "post": [{"probe": "job_state", "job_id": f"{tag}{i}", "want": "done"}]}
        for i in range(1, n + 1)
    ]
    return {"goal": f"{n} steps in a row", "budget": {"replans_max": 0}, "steps": steps}


def check(rep: RunReport, n: int) -> None:
    if rep.status != "succeeded" or len(rep.steps) != n or len(rep.completed) != n:
        raise SystemExit(f"the run did not end as it should: {rep.status}, {rep.failure}")


async def plan_bench(n: int) -> None:
    async with bench_stack() as b:
        t0 = time.perf_counter()
        rep = await b.run(long_plan(uuid.uuid4().hex[:4], n))
        wall = time.perf_counter() - t0
        check(rep, n)
        seg = await segments(b.client, rep.run_id)
        print(f"{n}-step plan, default bound (10,240 events, 10 MiB): {wall:.0f} s; "
              f"{seg.line(n, 'step')}; report {len(rep.model_dump_json()) / MIB:.2f} MiB")


def test_server() -> str:
    found = shutil.which("temporal-test-server", path=str(Path(sys.executable).parent))
    if found is None:
        raise SystemExit("temporal-test-server is not installed next to this Python")
    return found


async def wait_bench() -> None:
    async with bench_stack() as b:
        env = await WorkflowEnvironment.start_time_skipping(
            data_converter=data_converter(b.settings.encryption),
            test_server_existing_path=test_server(),
        )
        try:
            await day_long_wait(env, b.settings, b.database_url)
        finally:
            await env.shutdown()


async def day_long_wait(env: WorkflowEnvironment, settings: Settings, database_url: str) -> None:
    job = f"day-{uuid.uuid4().hex[:8]}"
    plan = {"goal": "wait a day for the export", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "requested"}},
         "post": [{"probe": "job_state", "job_id": job, "want": "done",
                   "wait": {"timeout_s": 86400, "interval_s": 10}}]},
    ]}
    day = replace(settings, temporal=replace(settings.temporal, task_queue="bench-day"))
    async with running_worker(env.client, day) as h:
        t0 = time.perf_counter()
        handle = await h.start(plan)
        for _ in range(47):  # 23 h 30 min, in skips the test server's RPC deadline allows
            await env.sleep(timedelta(minutes=30))
        await env.sleep(timedelta(minutes=20))
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
            await c.execute("UPDATE plangate.jobs SET state = 'done' WHERE job_id = %s", (job,))
        rep = await handle.result()
        wall = time.perf_counter() - t0
    if rep.status != "succeeded":
        raise SystemExit(f"the wait did not end as it should: {rep.status}, {rep.failure}")
    reads = sum(c.reads for c in rep.step(1).checks if c.phase == "post")
    seg = await segments(env.client, rep.run_id)
    print(
        f"24 h wait read every 10 s, done at 23 h 50 min: {reads:,} reads in {wall:.0f} s; "
        f"{seg.line(reads, 'read')}; report {len(rep.model_dump_json()) / 1024:.0f} KiB"
    )


async def main(steps: int) -> None:
    await plan_bench(steps)
    await wait_bench()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    asyncio.run(main(ap.parse_args().steps))
