"""Guarded throughput: 50 concurrent 10-step plans, guarded and unguarded (the same writes,
probes or none), steps per second of each and their ratio, in one run on one worker.

    .venv/bin/python -m bench.throughput [--plans 50] [--steps 10] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

import psycopg

from bench._stack import Bench, bench_stack, concurrent_steps_per_s
from bench.guard_cost import TABLE, plan


async def burst(b: Bench, plans: int, steps: int, guarded: bool) -> float:
    """Steps per second of ``plans`` plans of ``steps`` steps started at once."""
    return await concurrent_steps_per_s(b, plans, lambda: plan(steps, guarded))


async def main(plans: int, steps: int, rounds: int) -> None:
    async with bench_stack() as b:
        async with await psycopg.AsyncConnection.connect(b.database_url, autocommit=True) as conn:
            await conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id int)")
        await burst(b, 5, steps, True)  # warm-up, left out of the figures
        await burst(b, 5, steps, False)
        g: list[float] = []
        u: list[float] = []
        for _ in range(rounds):
            u.append(await burst(b, plans, steps, False))
            g.append(await burst(b, plans, steps, True))
    gm, um = statistics.median(g), statistics.median(u)
    # each round's pair measured back to back: their ratio is steadier than the medians' when
    # the machine's load drifts over the run
    ratios = [a / b for a, b in zip(g, u, strict=True)]
    print(f"{plans} concurrent plans of {steps} steps, {rounds} rounds")
    print(f"unguarded: median {um:.0f} steps/s {[round(x) for x in u]}")
    print(f"guarded:   median {gm:.0f} steps/s {[round(x) for x in g]}")
    print(
        f"guarded/unguarded throughput: median of the rounds' ratios "
        f"{statistics.median(ratios):.2f} {[round(r, 2) for r in ratios]}"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--plans", type=int, default=50)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    asyncio.run(main(a.plans, a.steps, a.rounds))
