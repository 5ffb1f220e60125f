"""Faults at every point of a run (issue 47): plans of two credits and two S3 puts on two
workers of one queue. Worker A (in this process) reaches Postgres, S3 and Temporal through
fault proxies; at one point in ``--fault-every`` (a point: an activity or local activity of a
run, just before its code or just after it returns) the network to one system is held or
reset, for 0.1-1.5 s or (``--long-share`` of them) 12-20 s, longer than any of plangate's own
tries; each point of a run its share (one met often, a probe's read, waits until the rarer ones,
a run's windows row, catch up). Worker B (``plangate worker``, direct) is SIGKILLed and started
again every 20-45 s. Then the world is counted per step (``tests/fault_points.py``).

    .venv/bin/python -m bench.fault_points [--runs 300] [--concurrency 12] [--fault-every 1]
                                           [--long-share 0.1] [--seed 47]

Prints the runs by how they ended, the faults by point and kind, failed runs (must be 0), runs
halted for a person (at most 5%), duplicate effects and misreported steps (0), the runs left
without their windows row, and the most Postgres connections held at once. Exit 1 if any of
those does not hold.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from dataclasses import replace
from pathlib import Path

from plangate.client.connection import connect
from plangate.testing import embedded_stack, s3_client
from plangate.world.settings import DEMO_SYSTEMS_VAR, Settings
from tests.fault_points import FaultSoak, SoakConfig, SoakResult

HALTS_ALLOWED = 0.05


async def main(cfg: SoakConfig, log_dir: Path | None) -> SoakResult:
    logging.getLogger("temporalio").setLevel(logging.ERROR)
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    logging.getLogger("plangate").setLevel(logging.ERROR)
    async with embedded_stack("fault-points") as stack:
        env = stack.env()
        settings = Settings.from_env({**env, DEMO_SYSTEMS_VAR: "1"})
        client = await connect(settings)
        s3 = s3_client(env)
        print(f"fault points: seed {cfg.seed}; {cfg.runs} runs, {cfg.concurrency} at once; a "
              f"fault at one point in {cfg.fault_every}, {cfg.long_share:.0%} of them long",
              flush=True)
        out = await FaultSoak(client, settings, env, log_dir or stack.state_dir).soak(cfg, s3)
        s3.close()
    for line in out.lines():
        print(line, flush=True)
    return out


def bad(out: SoakResult) -> bool:
    c = out.crash
    halted = len(c.halted) - len(out.failed)
    return bool(out.failed or c.duplicates or c.stray or c.unfinished or out.misreported
                or out.windows_missing or halted > HALTS_ALLOWED * max(1, len(c.reports)))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    d = SoakConfig()
    ap.add_argument("--runs", type=int, default=d.runs)
    ap.add_argument("--concurrency", type=int, default=d.concurrency)
    ap.add_argument("--fault-every", type=int, default=d.fault_every)
    ap.add_argument("--long-share", type=float, default=d.long_share)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--log-dir", type=Path, default=None, help="keep the workers' output here")
    a = ap.parse_args()
    config = replace(d, runs=a.runs, concurrency=a.concurrency, fault_every=a.fault_every,
                     long_share=a.long_share, seed=a.seed)
    raise SystemExit(1 if bad(asyncio.run(main(config, a.log_dir))) else 0)
