"""The crash harness, full run: plans of credits, e-mails and conditional S3 writes run by a
real worker process (``python -m plangate worker``) that is killed with SIGKILL at seeded random
moments and started again, at least 100 times across at least 20 plans; then the world is
counted (``tests/crash_harness.py``).

    .venv/bin/python -m bench.crash [--kills 100] [--plans 20] [--concurrency 20] [--steps 20]
                                    [--seed 12] [--kill-after 0.5 4.0] [--aimed 0]

Prints plans, kills, wall time, kills per minute, duplicate effects (must be 0), lost steps,
runs halted for a person and why. Exit 1 if any effect is duplicated or lost, any run did not
end, or more than 5% of runs halted.
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
from tests.crash_harness import KINDS, CrashConfig, CrashHarness, CrashResult

HALTS_ALLOWED = 0.05


async def main(cfg: CrashConfig, log_dir: Path | None) -> CrashResult:
    logging.getLogger("temporalio").setLevel(logging.ERROR)
    async with embedded_stack("crash") as stack:
        env = stack.env()
        settings = Settings.from_env({**env, DEMO_SYSTEMS_VAR: "1"})
        client = await connect(settings)
        s3 = s3_client(env)
        harness = CrashHarness(client, settings, env, log_dir or stack.state_dir)
        print(f"crash harness: seed {cfg.seed}, {cfg.kills} kills, "
              f"{cfg.concurrency} plans at once of {cfg.steps} steps", flush=True)
        result = await harness.run(cfg, s3)
        s3.close()
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    d = CrashConfig()
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--plans", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=20)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--kill-after", type=float, nargs=2, default=(0.5, 4.0))
    ap.add_argument("--aimed", type=int, default=0,
                    help="of the kills, how many first wait for a credit in flight")
    ap.add_argument("--only", choices=[k for k, _ in KINDS], default=None,
                    help="every step of this kind (default: a mix)")
    ap.add_argument("--log-dir", type=Path, default=None, help="keep the workers' output here")
    a = ap.parse_args()
    config = replace(d, kills=a.kills, plans=a.plans, concurrency=a.concurrency, steps=a.steps,
                     seed=a.seed, kill_after_s=tuple(a.kill_after), aimed=a.aimed,
                     kinds=((a.only, 1),) if a.only else KINDS)
    res = asyncio.run(main(config, a.log_dir))
    for line in res.lines():
        print(line)
    bad = res.duplicates or res.lost or res.stray or res.unfinished
    too_many = len(res.halted) > HALTS_ALLOWED * max(1, len(res.reports))
    raise SystemExit(1 if bad or too_many else 0)
