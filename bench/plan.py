"""From a goal to a checked plan on disk, with a model that answers at once (the local
OpenAI-compatible server the tests use): `plangate plan GOAL -o PLAN` as a user runs it, beside
`plangate check PLAN` of the same plan (the process and the checking alone), and the Python
API's `draft_plan` in one process (no process start).

    .venv/bin/python -m bench.plan [--repeats 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from plangate.replanner.planner import draft_plan
from plangate.testing import FakeOpenAI
from plangate.world.settings import Settings

ANSWER = {"steps": [
    {"n": 1, "tool": "s3.get", "effect": "read",
     "args": {"bucket": "vendor-drops", "key": "march.csv", "dest": "bench/march.csv"}},
    {"n": 2, "tool": "warehouse.load", "effect": "write", "depends_on": [1],
     "args": {"target": "staging.march", "source": "bench/march.csv"},
     "post": [{"probe": "table_rowcount", "table": "staging.march", "min": 60000}]},
], "reason": "fetch, then load"}


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return (time.perf_counter() - t0) * 1000


async def main(repeats: int) -> None:
    plangate = str(Path(sys.executable).parent / "plangate")
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI(
        responses=[json.dumps(ANSWER)] * (2 * repeats + 2)
    ) as fake:
        env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-bench",
               "PLANGATE_MODEL": "fake", "PLANGATE_WORKDIR": f"{tmp}/work"}
        out = f"{tmp}/plan.yaml"
        settings = Settings.from_env(env)
        timed([plangate, "plan", "load March", "-o", out], env)  # warm-up
        plan_ms, check_ms, api_ms = [], [], []
        for _ in range(repeats):
            plan_ms.append(timed([plangate, "plan", "load March", "-o", out], env))
            check_ms.append(timed([plangate, "check", out], env))
            t0 = time.perf_counter()
            draft = await draft_plan(
                "load March", settings.model, settings.catalogue, settings.world
            )
            await asyncio.to_thread(Path(f"{tmp}/api.yaml").write_text, draft.as_yaml())
            api_ms.append((time.perf_counter() - t0) * 1000)
    p, c, a = (statistics.median(x) for x in (plan_ms, check_ms, api_ms))
    print(f"repeats: {repeats}")
    print(f"plangate plan -o PLAN (process): median {p:.0f} ms {[round(x) for x in plan_ms]}")
    print(f"plangate check PLAN (process):   median {c:.0f} ms {[round(x) for x in check_ms]}")
    print(f"draft_plan + write (in process): median {a:.1f} ms {[round(x, 1) for x in api_ms]}")
    print(f"plan/check process ratio: {p / c:.2f}; in-process share of plan: {a / p:.3f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    asyncio.run(main(ap.parse_args().repeats))
