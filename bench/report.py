"""``plangate report`` over ``--runs`` finished runs (1,000; 10,000 takes minutes to make), two
ways side by side in one run: its runs read from the deployment's Postgres (``plangate.windows``,
a row each run wrote as it ended: one query, and visibility only for guarded team workflows)
against read from Temporal's visibility alone (the listing and each run's memo: ``plangate
report --visibility``, all there was before).

    .venv/bin/python -m bench.report [--runs 1000] [--rounds 3] [--concurrency 100]

Each run is the cheapest that finishes, one ``SELECT 1`` step (as ``bench.scale``'s), run
``--concurrency`` at once, all real. Timed, each the median of ``--rounds``, in alternation:
the whole command (``python -m plangate report``, a process of its own, its interpreter's start
included) each way; in this process, reading the runs each way (``client.report_runs``
against ``reporting.finished_runs``); computing and rendering the report (text and HTML). The
two reports are checked equal (the JSON of every tool) before anything is printed; exit 1 if
they are not, or a run did not succeed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from bench._stack import Bench, bench_stack
from plangate.client import report_runs, reporting
from plangate.client.staleness import Finished, per_tool
from plangate.client.staleness_html import page

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def plan() -> dict[str, Any]:
    return {"goal": "report bench", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "args": {"statement": "select_one"}}]}


async def finish(b: Bench, runs: int, at_once: int) -> None:
    gate = asyncio.Semaphore(at_once)

    async def one() -> str:
        async with gate:
            return str((await b.run(plan())).status)

    done = await asyncio.gather(*(one() for _ in range(runs)))
    bad = [s for s in done if s != "succeeded"]
    if bad:
        raise SystemExit(f"{len(bad)} runs did not succeed: {bad[:3]}")


async def timed(fn: Callable[[], Awaitable[T]]) -> tuple[float, T]:
    t0 = time.perf_counter()
    out = await fn()
    return time.perf_counter() - t0, out


async def command(b: Bench, *args: str) -> str:
    """``python -m plangate report ARGS`` on the bench's deployment: its stdout."""
    env = {**b.env, "PLANGATE_TASK_QUEUE": b.settings.temporal.task_queue}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "plangate", "report", "--since", "1h", "--json", *args,
        cwd=ROOT, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0 or err:
        raise SystemExit(f"plangate report {' '.join(args)}: exit {proc.returncode}: "
                         f"{err.decode()}")
    return out.decode()


def rendered(runs: list[Finished], since: datetime) -> list[dict[str, object]]:
    tools = per_tool(runs)
    reporting.text(tools, len(runs), since)
    page(tools, len(runs), since)
    return [t.json() for t in tools]


async def main(runs: int, rounds: int, at_once: int) -> None:
    async with bench_stack() as b:
        queue = b.settings.temporal.task_queue
        since = datetime.now(UTC)
        made_s, _ = await timed(lambda: finish(b, runs, at_once))
        for _ in range(600):  # visibility catches up with the last closes
            if len(await reporting.finished_runs(b.client, since, queue)) >= runs:
                break
            await asyncio.sleep(0.1)
        cli: dict[str, list[float]] = {"ledger": [], "visibility": []}
        inside: dict[str, list[float]] = {"ledger": [], "visibility": []}
        compute: list[float] = []
        outs: dict[str, Any] = {}
        found: dict[str, list[Finished]] = {}
        for _ in range(rounds):
            for way, flags in (("ledger", ()), ("visibility", ("--visibility",))):
                t0 = time.perf_counter()
                text = await command(b, *flags)
                cli[way].append(time.perf_counter() - t0)
                out = json.loads(text)
                del out["since"]
                outs[way] = out
            s, got = await timed(lambda: report_runs.gathered(b.client, b.world, since, queue))
            inside["ledger"].append(s)
            found["ledger"] = got.runs
            s, seen = await timed(lambda: reporting.finished_runs(b.client, since, queue))
            inside["visibility"].append(s)
            found["visibility"] = seen
            t0 = time.perf_counter()
            mine = rendered(got.runs, since)
            compute.append(time.perf_counter() - t0)
        if got.from_ledger != runs or outs["ledger"] != outs["visibility"] \
                or mine != rendered(seen, since):
            raise SystemExit(f"the reports differ: {got.from_ledger} of {runs} runs from the "
                             f"ledger, {outs['ledger']['runs']} / {outs['visibility']['runs']} "
                             "runs in the commands' reports")
    med = {k: statistics.median(v) for k, v in cli.items()}
    ins = {k: statistics.median(v) for k, v in inside.items()}
    c = statistics.median(compute)
    print(f"{runs} finished runs ({made_s:.0f} s to make them, {at_once} at once), "
          f"{rounds} rounds; the two reports equal ({len(found['ledger'])} runs each)")
    print(f"plangate report (the command):  ledger {med['ledger']:.2f} s "
          f"{[round(x, 2) for x in cli['ledger']]}   visibility {med['visibility']:.2f} s "
          f"{[round(x, 2) for x in cli['visibility']]}   ledger/visibility "
          f"{med['ledger'] / med['visibility']:.3f}")
    print(f"reading the runs (in process):  ledger {ins['ledger']:.3f} s "
          f"{[round(x, 3) for x in inside['ledger']]}   visibility {ins['visibility']:.3f} s "
          f"{[round(x, 3) for x in inside['visibility']]}   ledger/visibility "
          f"{ins['ledger'] / ins['visibility']:.3f}")
    print(f"computing and rendering (text and HTML): {c * 1000:.0f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=100)
    a = ap.parse_args()
    asyncio.run(main(a.runs, a.rounds, a.concurrency))
