"""Throughput beyond one worker: 50 concurrent guarded plans on one worker process and on
three (``plangate worker``, the command an operator runs; each with its own work directory,
files passed through the run's artifact prefix, ``PLANGATE_ARTIFACTS``), steps per second of
each and their ratio, measured side by side in one run on one embedded stack.

    .venv/bin/python -m bench.workers [--plans 50] [--steps 10] [--rounds 2]

Two kinds of plan: ``jobs`` (each step a job row written, then read back: bench.guard_cost's
guarded plan) and ``files`` (get-then-load pairs: each load reads the file its get left, on
whichever worker each runs). On a machine with fewer cores than workers, the ratio says what
the server, Postgres and S3 beside them leave over, not what three machines would do.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg

from bench._stack import concurrent_steps_per_s
from bench.guard_cost import TABLE
from bench.guard_cost import plan as jobs_plan
from plangate.client.connection import connect
from plangate.dev.stack import EmbeddedStack
from plangate.testing import Harness, s3_client
from plangate.world.settings import DEMO_SYSTEMS_VAR, Settings

READY = "plangate: worker polling"
ARTIFACTS = "bench-artifacts"
DROPS = "bench-drops"


def files_plan(steps: int) -> dict[str, Any]:
    """``steps`` // 2 get-then-load pairs, each load into a table of its own."""
    tag = uuid.uuid4().hex[:8]
    out: list[dict[str, Any]] = []
    for k in range(1, steps // 2 + 1):
        out += [
            {"n": 2 * k - 1, "tool": "s3.get", "effect": "read",
             "args": {"bucket": DROPS, "key": "drop.csv", "dest": f"in/{tag}-{k}.csv"}},
            {"n": 2 * k, "tool": "warehouse.load", "depends_on": [2 * k - 1],
             "args": {"target": f"bench_files.t{tag}_{k}", "source": f"in/{tag}-{k}.csv"}},
        ]
    return {"goal": "bench files", "budget": {"replans_max": 0}, "steps": out}


@contextlib.asynccontextmanager
async def workers(n: int, env: dict[str, str], tmp: Path) -> AsyncIterator[None]:
    """``n`` worker processes on the environment's task queue, each ready (polling)."""
    procs: list[asyncio.subprocess.Process] = []
    try:
        for i in range(n):
            wenv = {**env, "PLANGATE_WORKDIR": str(tmp / f"w{n}-{i}")}
            procs.append(await asyncio.create_subprocess_exec(
                sys.executable, "-m", "plangate", "worker", env=wenv,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            ))
        for p in procs:
            line = (await p.stdout.readline()).decode() if p.stdout else ""
            if READY not in line:
                raise SystemExit(f"a worker did not start: {line!r}")
        # keep reading what they print, or a full pipe would stall them
        drains = [asyncio.create_task(_drain(p.stdout)) for p in procs if p.stdout]
        yield
        for d in drains:
            d.cancel()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            await p.wait()


async def _drain(out: asyncio.StreamReader) -> None:
    while await out.read(1 << 16):
        pass


async def main(plans: int, steps: int, rounds: int) -> None:
    kinds: dict[str, Callable[[], dict[str, Any]]] = {
        "jobs": lambda: jobs_plan(steps, True),
        "files": lambda: files_plan(steps),
    }
    figures: dict[tuple[str, int], list[float]] = {(k, n): [] for k in kinds for n in (1, 3)}
    with tempfile.TemporaryDirectory() as tmp:
        async with EmbeddedStack(tmp, ui=False) as stack:
            env = {**os.environ, **stack.env(), DEMO_SYSTEMS_VAR: "1",
                   "PLANGATE_TASK_QUEUE": f"bench-{uuid.uuid4().hex[:8]}",
                   "PLANGATE_ARTIFACTS": f"s3://{ARTIFACTS}/runs"}
            settings = Settings.from_env(env)
            s3 = s3_client(env)
            for b in (ARTIFACTS, DROPS):
                s3.create_bucket(Bucket=b)
            body = "id,amount\n" + "".join(f"{i},{i * 10}\n" for i in range(100))
            s3.put_object(Bucket=DROPS, Key="drop.csv", Body=body.encode())
            async with await psycopg.AsyncConnection.connect(
                stack.database_url, autocommit=True
            ) as conn:
                await conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id int)")
                await conn.execute("CREATE SCHEMA IF NOT EXISTS bench_files")
            h = Harness(await connect(settings), replace(settings))
            for r in range(rounds):
                for n in (1, 3) if r % 2 == 0 else (3, 1):
                    async with workers(n, env, Path(tmp)):
                        for kind, make in kinds.items():
                            await concurrent_steps_per_s(h, 5, make)  # warm-up: not counted
                            figures[kind, n].append(await concurrent_steps_per_s(h, plans, make))
            s3.close()
    print(f"{plans} concurrent guarded plans of {steps} steps, {rounds} rounds, "
          f"{os.cpu_count()} cores")
    for kind in kinds:
        one, three = (statistics.median(figures[kind, n]) for n in (1, 3))
        print(f"{kind:5}  1 worker: {one:6.0f} steps/s {[round(x) for x in figures[kind, 1]]}"
              f"   3 workers: {three:6.0f} steps/s {[round(x) for x in figures[kind, 3]]}"
              f"   3/1: {three / one:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--plans", type=int, default=50)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    asyncio.run(main(a.plans, a.steps, a.rounds))
