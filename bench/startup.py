"""What a client pays before it does anything: ``from plangate import Plangate`` in a fresh
interpreter, and a whole ``plangate check`` process of a 4-step plan, each beside
``python -c pass``, alternating, medians of ``--runs`` (default 11). Goals: the import at most
0.3 s, the check at most 0.5 s. Also the modules a client must never load.

    .venv/bin/python -m bench.startup [--runs 11]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("boto3", "botocore", "psycopg", "psycopg_pool", "openai")

PLAN = {"goal": "four steps", "budget": {"replans_max": 0}, "steps": [
    {"n": 1, "tool": "s3.get", "effect": "read",
     "args": {"bucket": "vendor-drops", "key": "k.csv", "dest": "work/k.csv"}},
    {"n": 2, "tool": "warehouse.load", "depends_on": [1],
     "args": {"target": "staging.t", "source": "work/k.csv"}},
    {"n": 3, "tool": "warehouse.run_sql", "depends_on": [2],
     "args": {"statement": "analyze", "params": {"table": "staging.t"}}},
    {"n": 4, "tool": "s3.put", "depends_on": [3],
     "args": {"bucket": "reports", "key": "done.txt", "body": "done"}},
]}


def timed(argv: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - began


def main(runs: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLANGATE_", "TEMPORAL_"))}
    env["TEMPORAL_CONFIG_FILE"] = os.devnull
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "plan.json"
        plan.write_text(json.dumps(PLAN))
        env["PLANGATE_WORKDIR"] = str(Path(tmp) / "work")
        commands = {
            "python -c pass": [python, "-c", "pass"],
            "from plangate import Plangate": [python, "-c", "from plangate import Plangate"],
            # python -m: the checkout it is run from, as the import is
            "plangate check (4 steps)": [python, "-m", "plangate", "check", str(plan)],
        }
        for argv in commands.values():  # warm the file cache
            timed(argv, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, argv in commands.items():
                times[name].append(timed(argv, env))
        probe = ("import sys; from plangate import Plangate; Plangate; "
                 f"print([m for m in {HEAVY!r} if m in sys.modules])")
        loaded = subprocess.run([python, "-c", probe], env=env, check=True,
                                capture_output=True, text=True).stdout.strip()
    base = statistics.median(times["python -c pass"])
    print(f"runs: {runs} (medians)")
    for name, xs in times.items():
        m = statistics.median(xs)
        print(f"{name:32s} {m:6.3f} s  ({m / base:5.1f} x python -c pass; "
              f"min {min(xs):.3f}, max {max(xs):.3f})")
    print(f"heavy modules after the import: {loaded}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=11)
    main(ap.parse_args().runs)
