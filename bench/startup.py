"""What a client pays before it does anything: ``from plangate import Plangate`` in a fresh
interpreter, and a whole ``plangate check`` process of a 4-step plan, each beside
``python -c pass``, alternating, medians of ``--runs`` (default 11). Goals: the import at most
0.3 s, the check at most 0.5 s. Also the modules a client must never load.

``--against REF`` measures the same two of HEAD beside those of another commit, each run from a
checkout of its own in a temporary directory (a checkout is not the working tree: the same
commit measured there and in the tree differed by 10%) with this venv, alternating, and prints
the ratios.

    .venv/bin/python -m bench.startup [--runs 11] [--against REF]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def timed(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    began = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - began


def checkout(ref: str, into: Path) -> Path:
    """REF's tree (no .git) in a new directory of ``into``: ``python -m plangate`` run from
    there imports it."""
    tree = Path(tempfile.mkdtemp(dir=into))
    archive = subprocess.run(["git", "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def main(runs: int, against: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLANGATE_", "TEMPORAL_"))}
    env["TEMPORAL_CONFIG_FILE"] = os.devnull
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "plan.json"
        plan.write_text(json.dumps(PLAN))
        env["PLANGATE_WORKDIR"] = str(Path(tmp) / "work")
        here = Path.cwd() if against is None else checkout("HEAD", Path(tmp))
        mine = {
            "from plangate import Plangate": [python, "-c", "from plangate import Plangate"],
            # python -m: the checkout it is run from, as the import is
            "plangate check (4 steps)": [python, "-m", "plangate", "check", str(plan)],
        }
        commands: dict[str, tuple[list[str], Path]] = {
            "python -c pass": ([python, "-c", "pass"], here),
            **{name: (argv, here) for name, argv in mine.items()},
        }
        if against is not None:
            there = checkout(against, Path(tmp))
            commands.update({f"{name} @ {against}": (argv, there) for name, argv in mine.items()})
        for argv, cwd in commands.values():  # warm the file cache
            timed(argv, env, cwd)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, (argv, cwd) in commands.items():
                times[name].append(timed(argv, env, cwd))
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
    if against is not None:
        for name in mine:
            ratio = statistics.median(times[name]) / statistics.median(times[f"{name} @ {against}"])
            print(f"{name:32s} HEAD / {against}: {ratio:5.3f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--against", metavar="REF", help="a commit to measure beside this tree")
    args = ap.parse_args()
    if args.against is not None and shutil.which("git") is None:
        ap.error("--against needs git")
    main(args.runs, args.against)
