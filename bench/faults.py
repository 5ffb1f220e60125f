"""Faults where the first actor is not gone (issue 24): concurrent plans of credits, e-mails and
conditional S3 writes on several ``plangate worker`` processes, each reaching Postgres, S3 and
Temporal through fault proxies of its own on 127.0.0.1, while seeded faults are injected: a
worker paused (SIGSTOP) past the heartbeat timeout, then woken; a worker partitioned from one
system (everything held, or every connection reset), then healed; the Temporal server killed
(SIGKILL) and started again on its state. Then the world is counted per step, as ``bench.crash``
does (``tests/fault_harness.py``).

    .venv/bin/python -m bench.faults [--pauses 100] [--partitions 50] [--restarts 10]
                                     [--workers 3] [--concurrency 9] [--steps 12] [--seed 24]

Prints the faults injected by kind, then duplicate effects (must be 0), lost steps, runs that did
not end and runs halted for a person, with why. Exit 1 if any effect is duplicated or lost, any
run did not end, or more than 5% of runs halted.
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
from tests.fault_harness import FaultMix, MixConfig, MixResult

HALTS_ALLOWED = 0.05


async def main(cfg: MixConfig, log_dir: Path | None) -> MixResult:
    logging.getLogger("temporalio").setLevel(logging.ERROR)
    async with embedded_stack("faults") as stack:
        env = stack.env()
        settings = Settings.from_env({**env, DEMO_SYSTEMS_VAR: "1"})
        client = await connect(settings)
        s3 = s3_client(env)
        mix = FaultMix(stack, client, settings, log_dir or stack.state_dir)
        print(f"faults: seed {cfg.seed}; {cfg.pauses} pauses, {cfg.partitions} partitions of "
              f"each system, {cfg.restarts} Temporal restarts; {cfg.workers} workers, "
              f"{cfg.concurrency} plans at once of {cfg.steps} steps", flush=True)
        result = await mix.mix(cfg, s3)
        s3.close()
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    d = MixConfig()
    ap.add_argument("--pauses", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=50, help="of each system")
    ap.add_argument("--restarts", type=int, default=10)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--plans", type=int, default=9)
    ap.add_argument("--concurrency", type=int, default=9)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--gap", type=float, nargs=2, default=d.gap_s,
                    help="seconds from one fault's start to the next one's")
    ap.add_argument("--log-dir", type=Path, default=None, help="keep the workers' output here")
    a = ap.parse_args()
    config = replace(d, pauses=a.pauses, partitions=a.partitions, restarts=a.restarts,
                     workers=a.workers, plans=a.plans, concurrency=a.concurrency,
                     steps=a.steps, seed=a.seed, gap_s=tuple(a.gap))
    res = asyncio.run(main(config, a.log_dir))
    for line in res.lines():
        print(line)
    c = res.crash
    bad = c.duplicates or c.lost or c.stray or c.unfinished
    too_many = len(c.halted) > HALTS_ALLOWED * max(1, len(c.reports))
    raise SystemExit(1 if bad or too_many else 0)
