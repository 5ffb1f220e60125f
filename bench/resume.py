"""Resuming a plan that died at step 5 of 7: how long the second start takes to walk steps 1-4
as skips and reach step 5's tool, against the first run's time to reach step 5 doing the work.

    .venv/bin/python -m bench.resume [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import uuid
from typing import Any

import psycopg

from bench._stack import bench_stack
from plangate.records.report import RunReport


def resume_plan(tag: str, table: str) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    for n in range(1, 8):
        job = f"{tag}-{n}"
        steps.append(
            {
                "n": n,
                "tool": "warehouse.run_sql",
                "depends_on": [n - 1] if n > 1 else [],
                "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
                "post": [{"probe": "job_state", "job_id": job, "want": "done"}],
            }
        )
    steps[4]["pre"] = [{"probe": "column_exists", "table": table, "column": "ready"}]
    return {"goal": "seven steps", "budget": {"replans_max": 0}, "steps": steps}


def first_at(rep: RunReport) -> Any:
    return min(t.at for s in rep.steps for t in s.transitions)


async def main(repeats: int) -> None:
    first_ms: list[float] = []
    second_ms: list[float] = []
    async with bench_stack() as b:
        conn = await psycopg.AsyncConnection.connect(b.database_url, autocommit=True)
        for _ in range(repeats):
            tag = uuid.uuid4().hex[:8]
            table = f"resume_{tag}"
            await conn.execute(f"CREATE TABLE {table} (id int)")  # bench's own literal name
            one = await b.run(resume_plan(tag, table))
            reached = min(t.at for t in one.step(5).transitions)
            first_ms.append((reached - first_at(one)).total_seconds() * 1000)
            await conn.execute(f"ALTER TABLE {table} ADD COLUMN ready bool")
            # resumed as the same run: the jobs its steps set are its own
            two = await b.run(resume_plan(tag, table), run_id=one.run_id)
            if [s.state for s in two.steps[:4]] != ["SKIPPED"] * 4:
                raise SystemExit("second run did not skip steps 1-4")
            started = two.step(5).timings.tool_started_at
            if started is None:
                raise SystemExit("step 5 never started")
            second_ms.append((started - first_at(two)).total_seconds() * 1000)
        await conn.close()
    f, s = statistics.median(first_ms), statistics.median(second_ms)
    print(f"repeats: {repeats}")
    print(
        f"first run, start -> step 5 reached (steps 1-4 done for real): median {f:.0f} ms "
        f"{[round(x) for x in first_ms]}"
    )
    print(
        f"second run, start -> step 5's tool started (steps 1-4 skipped): median {s:.0f} ms "
        f"{[round(x) for x in second_ms]}"
    )
    print(f"second/first ratio: {s / f:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    asyncio.run(main(ap.parse_args().repeats))
