"""The per-step cost of guarding: a 10-step plan with probes on every step against the same plan
without probes (a tool with no contract), alternating on one dev server, several pairs.

    .venv/bin/python -m bench.guard_cost [--pairs 6] [--steps 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import uuid
from dataclasses import replace
from typing import Any

import psycopg
from temporalio.worker import Worker

from activities.bootstrap import ensure_schema
from activities.world import World
from plangate import runs
from plangate.checking import check
from plangate.settings import Settings
from plangate.stack import EmbeddedStack
from plangate.worker_factory import WORKFLOWS, activities_for, connect
from plans.load import parse_plan

TABLE = "bench_guard"


def plan(steps: int, guarded: bool) -> dict[str, Any]:
    """Each step marks a job done; guarded, it first checks a column and then reads the job
    back (a post condition that holds only after the call, so no step is skipped)."""
    tag = uuid.uuid4().hex[:8]
    out = []
    for n in range(1, steps + 1):
        job = f"bench-{tag}-{n}"
        step: dict[str, Any] = {
            "n": n,
            "tool": "warehouse.run_sql",
            "depends_on": [n - 1] if n > 1 else [],
            "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
        }
        if guarded:
            step["pre"] = [{"probe": "column_exists", "table": TABLE, "column": "id"}]
            step["post"] = [{"probe": "job_state", "job_id": job, "want": "done"}]
        out.append(step)
    return {"goal": "bench", "budget": {"replans_max": 0}, "steps": out}


async def timed_run(client: Any, settings: Settings, body: dict[str, Any]) -> float:
    """Seconds from the first step's first transition to the last step's last, as the
    workflow recorded them (the client's result long-poll adds noise of its own)."""
    handle = await runs.start(client, settings, check(parse_plan(body)))
    rep = await handle.result()
    if rep.status != "succeeded" or any(s.state != "DONE" for s in rep.steps):
        raise SystemExit(f"bench run {rep.run_id} did not run every step: {rep.status}")
    at = [t.at for s in rep.steps for t in s.transitions]
    return (max(at) - min(at)).total_seconds()


async def main(pairs: int, steps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with EmbeddedStack(tmp, ui=False) as stack:
            settings = replace(Settings.from_env(stack.env()), task_queue=f"bench-{uuid.uuid4()}")
            async with await psycopg.AsyncConnection.connect(
                stack.database_url, autocommit=True
            ) as conn:
                await conn.execute(f"CREATE TABLE {TABLE} (id int)")  # bench's own literal name
                await conn.execute(f"INSERT INTO {TABLE} VALUES (1)")
            world = World(settings)
            await ensure_schema(world)
            client = await connect(settings)
            async with Worker(
                client,
                task_queue=settings.task_queue,
                workflows=WORKFLOWS,
                activities=activities_for(world),
            ):
                await timed_run(client, settings, plan(steps, True))  # warm-up
                await timed_run(client, settings, plan(steps, False))
                g: list[float] = []
                u: list[float] = []
                for _ in range(pairs):
                    u.append(await timed_run(client, settings, plan(steps, False)))
                    g.append(await timed_run(client, settings, plan(steps, True)))
            await world.close()
    gm, um = statistics.median(g) / steps * 1000, statistics.median(u) / steps * 1000
    print(f"steps per plan: {steps}, pairs: {pairs}")
    print(f"unguarded per step: median {um:.1f} ms  (runs: {[round(x, 3) for x in u]} s)")
    print(f"guarded   per step: median {gm:.1f} ms  (runs: {[round(x, 3) for x in g]} s)")
    ratios = [a / b for a, b in zip(g, u, strict=True)]
    print(
        f"guarded/unguarded per-step ratio: median {statistics.median(ratios):.2f} "
        f"(pairs: {[round(r, 2) for r in ratios]})"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    asyncio.run(main(a.pairs, a.steps))
