"""Faults where the first actor is not gone (issue 24): concurrent plans of credits, e-mails and
conditional S3 writes on several ``plangate worker`` processes, each reaching Postgres, S3 and
Temporal through fault proxies of its own on 127.0.0.1, while seeded faults are injected: a
worker paused (SIGSTOP) past the heartbeat timeout, then woken; a worker partitioned from one
system (everything held, or every connection reset), then healed; the Temporal server killed
(SIGKILL) and started again on its state. Then the world is counted per step, as ``bench.crash``
does (``tests/fault_harness.py``).

    .venv/bin/python -m bench.faults [--pauses 100] [--partitions 50] [--restarts 10]
                                     [--workers 3] [--concurrency 9] [--steps 12] [--seed 24]
                                     [--loads 20] [--load-rows 300000] [--no-mix]

Then ``--loads`` runs, each loading a CSV over a table of 10 old rows, Postgres killed in each
while its COPY runs (SIGKILL of the COPY's backend: Postgres ends every session and recovers).

Prints the faults injected by kind, then duplicate effects (must be 0), lost steps, runs that did
not end and runs halted for a person, with why; then the loads: tables holding part of a load
right after the crash (must be 0) and at the end. Exit 1 if any effect is duplicated or lost, any
run did not end, more than 5% of runs halted, or a table held a partial load.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from dataclasses import replace
from pathlib import Path

from plangate.client.connection import connect
from plangate.testing import embedded_stack, running_worker, s3_client
from plangate.world.settings import DEMO_SYSTEMS_VAR, Settings
from tests.fault_harness import FaultMix, LoadsResult, MixConfig, MixResult, loads_killed

HALTS_ALLOWED = 0.05


async def main(cfg: MixConfig, log_dir: Path | None, mix: bool, loads: int, rows: int
               ) -> tuple[MixResult | None, LoadsResult | None]:
    logging.getLogger("temporalio").setLevel(logging.ERROR)
    mixed = loaded = None
    async with embedded_stack("faults") as stack:
        env = stack.env()
        settings = Settings.from_env({**env, DEMO_SYSTEMS_VAR: "1"})
        client = await connect(settings)
        if mix:
            s3 = s3_client(env)
            harness = FaultMix(stack, client, settings, log_dir or stack.state_dir)
            print(f"faults: seed {cfg.seed}; {cfg.pauses} pauses, {cfg.partitions} partitions "
                  f"of each system, {cfg.restarts} Temporal restarts; {cfg.workers} workers, "
                  f"{cfg.concurrency} plans at once of {cfg.steps} steps", flush=True)
            mixed = await harness.mix(cfg, s3)
            s3.close()
            for line in mixed.lines():
                print(line, flush=True)
        if loads:
            print(f"loads: {loads} of {rows} rows, Postgres killed in each", flush=True)
            store = s3_client(env)
            async with running_worker(client, settings) as h:
                loaded = await loads_killed(h, store, loads, rows, cfg.seed)
            store.close()
            for line in loaded.lines():
                print(line, flush=True)
    return mixed, loaded


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
    ap.add_argument("--loads", type=int, default=20,
                    help="loads in each of which Postgres is killed (after the mix)")
    ap.add_argument("--load-rows", type=int, default=300_000)
    ap.add_argument("--no-mix", action="store_true", help="only the loads")
    ap.add_argument("--log-dir", type=Path, default=None, help="keep the workers' output here")
    a = ap.parse_args()
    config = replace(d, pauses=a.pauses, partitions=a.partitions, restarts=a.restarts,
                     workers=a.workers, plans=a.plans, concurrency=a.concurrency,
                     steps=a.steps, seed=a.seed, gap_s=tuple(a.gap))
    res, lds = asyncio.run(main(config, a.log_dir, not a.no_mix, a.loads, a.load_rows))
    bad = False
    if res is not None:
        c = res.crash
        bad = bool(c.duplicates or c.lost or c.stray or c.unfinished
                   or len(c.halted) > HALTS_ALLOWED * max(1, len(c.reports)))
    if lds is not None:
        bad = bad or bool(lds.partial or lds.unfinished or lds.wrong_end)
    raise SystemExit(1 if bad else 0)
