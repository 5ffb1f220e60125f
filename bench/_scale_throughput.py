"""Throughput at scale (issue 50), ``bench.scale --throughput``: ``--plans`` plans of
``--steps`` guarded steps started at once on one worker (``bench.guard_cost.plan``: each step
``set_job_state`` with a pre read and a post read), against as many hand-written workflows
(``bench._bare_workflow.BareChain``: the same write, one activity a step, no reads) started at
once on one worker of plangate's limits (32 activities at once, the deployment's cached runs:
200), both in this process on one embedded stack, ``--rounds`` rounds, the two kinds' order
alternating round by round (after a warm-up of 20 plans each, left out).

Each kind's figures: steps per second (every step of every run / the seconds from the first
start to the last run's end, as the client sees them: plangate's submission of each plan
included) and step latency p50 and p99: from a step's write to the next step's write in the
same run, as Postgres timed them (``plangate.jobs.updated_at``, which the same statement sets
in both kinds), so a run's first step is left out (its time is its start's, queued behind all
the others'). This process's CPU a step (client, both workers, the activities). Then guarded /
hand-written: throughput (goal at least 0.8) and p99 latency, each round's.

    .venv/bin/python -m bench.scale --throughput [--plans 1000] [--steps 5] [--rounds 1]

The defaults are the issue's size, one round: 9-13 minutes on this 2-core machine shared with
other engineers' tests (load average 7-15), the stack's start included.
With 1,000 runs at once and 200 cached, both workers evict runs and replay them at
their next workflow task: that is each kind's cost at this size on these limits (the SDK's own
defaults, which a team's worker would have, are 1,000 cached runs and 100 activities at once).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

import psycopg
from temporalio.worker import Worker

from bench._bare_workflow import BareChain, Chain
from bench._cpu import THIS, StackCpu
from bench._stack import Bench, bench_stack, concurrent_runs
from bench.bare import Writes
from bench.guard_cost import TABLE, plan
from plangate.worker.assembly import MAX_CONCURRENT_ACTIVITIES

GUARDED, HAND = "guarded", "hand-written"
WARMUP_PLANS = 20


@dataclass(frozen=True)
class Burst:
    seconds: float
    steps: int
    gaps_ms: list[float]  # step n-1's write -> step n's, n >= 2, every run
    cpu_s: float  # this process's

    @property
    def per_s(self) -> float:
        return self.steps / self.seconds

    def pct(self, q: int) -> float:
        return statistics.quantiles(self.gaps_ms, n=100, method="inclusive")[q - 1]


async def gaps(b: Bench, owners: list[str], steps: int) -> list[float]:
    """The milliseconds between each run's successive writes, from ``plangate.jobs``."""
    at: dict[str, list[datetime]] = defaultdict(list)
    async with await psycopg.AsyncConnection.connect(b.database_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT owner, updated_at FROM plangate.jobs "
                                 "WHERE owner = ANY(%s) ORDER BY owner, updated_at", (owners,))
        for owner, updated in await cur.fetchall():
            at[owner].append(updated)
    short = [o for o in owners if len(at[o]) != steps]
    if short:
        raise SystemExit(f"{len(short)} runs wrote other than {steps} jobs, e.g. {short[0]}: "
                         f"{len(at[short[0]])}")
    return [(t[i] - t[i - 1]).total_seconds() * 1000 for t in at.values()
            for i in range(1, len(t))]


class Throughput:
    def __init__(self, b: Bench, queue: str, steps: int) -> None:
        self.b, self.queue, self.steps = b, queue, steps
        self.cpu = StackCpu(b.settings.temporal.address, b.database_url)

    async def guarded(self, plans: int) -> tuple[float, list[str]]:
        elapsed, reports = await concurrent_runs(
            self.b, [plan(self.steps, True) for _ in range(plans)])
        return elapsed, [r.run_id for r in reports]

    async def hand(self, plans: int) -> tuple[float, list[str]]:
        ids = [f"tput-{uuid.uuid4().hex[:12]}" for _ in range(plans)]
        t0 = time.perf_counter()
        done = await asyncio.gather(*(self.b.client.execute_workflow(
            BareChain.run, Chain([f"{i}-{n}" for n in range(1, self.steps + 1)], i),
            id=i, task_queue=self.queue) for i in ids))
        elapsed = time.perf_counter() - t0
        short = [i for i, d in zip(ids, done, strict=True) if d != self.steps]
        if short:
            raise SystemExit(f"{len(short)} hand-written runs wrote fewer than {self.steps}")
        return elapsed, ids

    async def burst(self, kind: str, plans: int) -> Burst:
        c0 = self.cpu.seconds()[THIS]
        elapsed, ids = await (self.guarded(plans) if kind == GUARDED else self.hand(plans))
        cpu = self.cpu.seconds()[THIS] - c0
        return Burst(elapsed, plans * self.steps, await gaps(self.b, ids, self.steps), cpu)


async def main(plans: int, steps: int, rounds: int) -> None:
    load0 = os.getloadavg()
    async with bench_stack() as b:
        async with await psycopg.AsyncConnection.connect(b.database_url, autocommit=True) as conn:
            await conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id int)")  # bench's own
            await conn.execute(f"INSERT INTO {TABLE} VALUES (1)")
        queue = f"tput-{uuid.uuid4().hex[:8]}"
        async with Worker(b.client, task_queue=queue, workflows=[BareChain],
                          activities=[Writes(b).set_job],
                          max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
                          max_cached_workflows=b.settings.temporal.max_cached_runs):
            t = Throughput(b, queue, steps)
            for kind in (GUARDED, HAND):
                await t.burst(kind, WARMUP_PLANS)
            got: dict[str, list[Burst]] = {GUARDED: [], HAND: []}
            for r in range(rounds):
                for kind in (HAND, GUARDED) if r % 2 == 0 else (GUARDED, HAND):
                    got[kind].append(await t.burst(kind, plans))
                    x = got[kind][-1]
                    print(f"  round {r + 1} {kind}: {x.per_s:.1f} steps/s, {x.seconds:.1f} s",
                          flush=True)
    report(plans, steps, rounds, got, load0, os.getloadavg())


def report(plans: int, steps: int, rounds: int, got: dict[str, list[Burst]],
           load0: tuple[float, float, float], load1: tuple[float, float, float]) -> None:
    print(f"{plans} plans of {steps} steps started at once on one worker, {rounds} round(s), "
          f"the kinds alternating; load average (1, 5, 15 min) before "
          f"{', '.join(f'{x:.2f}' for x in load0)}, after {', '.join(f'{x:.2f}' for x in load1)}")
    for kind in (GUARDED, HAND):
        for x in got[kind]:
            print(f"  {kind:<13} {x.per_s:6.1f} steps/s ({x.seconds:6.1f} s)  step latency p50 "
                  f"{x.pct(50):7.1f} ms  p99 {x.pct(99):7.1f} ms  (of {len(x.gaps_ms)})  "
                  f"CPU of this process {x.cpu_s / x.steps * 1000:.2f} ms a step")
    pairs = list(zip(got[GUARDED], got[HAND], strict=True))
    tput = [g.per_s / h.per_s for g, h in pairs]
    p99 = [g.pct(99) / h.pct(99) for g, h in pairs]
    cpu = [g.cpu_s / h.cpu_s for g, h in pairs]
    print(f"  guarded / hand-written steps/s: {', '.join(f'{x:.2f}' for x in tput)} (median "
          f"{statistics.median(tput):.2f})   goal: at least 0.8")
    print(f"  guarded / hand-written p99 step latency: {', '.join(f'{x:.2f}' for x in p99)} "
          f"(median {statistics.median(p99):.2f})")
    print(f"  guarded / hand-written CPU of this process: {', '.join(f'{x:.2f}' for x in cpu)}")


def run(a: argparse.Namespace) -> int:
    asyncio.run(main(a.plans, a.steps, a.rounds))
    return 0
