"""The per-step cost of guarding: a 10-step plan with probes on every step against the same plan
without probes (a tool with no contract), alternating on one dev server, several pairs.

    .venv/bin/python -m bench.guard_cost [--pairs 6] [--steps 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import uuid
from dataclasses import replace
from typing import Any

import psycopg

from bench._stack import Bench, bench_stack
from plangate.activities.tools._statements import BUILDS
from plangate.activities.tools.statements import STATEMENTS
from plangate.records.report import Phase, RunReport

TABLE = "bench_guard"


# The same statement as set_job_state with no contract at all (set_job_state's evidence would
# add a skip read to every step): the unguarded side does the same write and reads nothing.
UNGUARDED = "bench_set_job_state_unguarded"
STATEMENTS[UNGUARDED] = replace(STATEMENTS["set_job_state"], post=(), done=())
BUILDS[UNGUARDED] = BUILDS["set_job_state"]


def plan(steps: int, guarded: bool) -> dict[str, Any]:
    """Each step marks a job done; guarded, it first checks a column and then reads the job
    back (a post condition that holds only after the call, so no step is skipped)."""
    tag = uuid.uuid4().hex[:8]
    out = []
    for n in range(1, steps + 1):
        job = f"bench-{tag}-{n}"
        step: dict[str, Any] = {
            "n": n,
            "tool": "warehouse.run_sql",
            "depends_on": [n - 1] if n > 1 else [],
            "args": {"statement": "set_job_state" if guarded else UNGUARDED,
                     "params": {"job_id": job, "state": "done"}},
        }
        if guarded:
            step["pre"] = [{"probe": "column_exists", "table": TABLE, "column": "id"}]
            step["post"] = [{"probe": "job_state", "job_id": job, "want": "done"}]
        out.append(step)
    return {"goal": "bench", "budget": {"replans_max": 0}, "steps": out}


PROBE_MS: list[float] = []  # time inside the probes themselves, per guarded step
PROBE_CALLS: list[float] = []  # probe calls per guarded step (fused reads share one)
CHECK_TO_USE_MS: list[float] = []  # the read the tool acted on -> tool start, per guarded step
WORKFLOW_READ_MS: list[float] = []  # the workflow's own first read -> tool start, the same steps


def workflow_read_ms(rep: RunReport) -> list[float]:
    """Per step, the workflow's read before the call (the step's own, or fused into the step
    before's post check) to the tool's start: the window had the tool not read again at the
    call, i.e. the call's dispatch."""
    out = []
    for s in rep.steps:
        first = next((c for c in s.checks if c.phase in (Phase.PRE, Phase.SKIP_PRE)), None)
        if first is not None and first.read_at and s.timings.tool_started_at:
            out.append((s.timings.tool_started_at - first.read_at).total_seconds() * 1000)
    return out


async def timed_run(b: Bench, body: dict[str, Any], record: bool = True) -> float:
    """Seconds from the first step's first transition to the last step's last, as the
    workflow recorded them (the client's result long-poll adds noise of its own)."""
    rep = await b.run(body)
    if rep.status != "succeeded" or any(s.state != "DONE" for s in rep.steps):
        raise SystemExit(f"bench run {rep.run_id} did not run every step: {rep.status}")
    if rep.metrics.probes_run and record:
        PROBE_MS.append(rep.metrics.probe_ms / len(rep.steps))
        calls = {c.read_at for s in rep.steps for c in s.checks}  # a fused read: one time
        PROBE_CALLS.append(len(calls) / len(rep.steps))
        CHECK_TO_USE_MS.extend(s.check_to_use_ms for s in rep.steps if s.check_to_use_ms)
        WORKFLOW_READ_MS.extend(workflow_read_ms(rep))
    at = [t.at for s in rep.steps for t in s.transitions]
    return (max(at) - min(at)).total_seconds()


async def main(pairs: int, steps: int) -> None:
    async with bench_stack() as b:
        async with await psycopg.AsyncConnection.connect(b.database_url, autocommit=True) as conn:
            await conn.execute(f"CREATE TABLE {TABLE} (id int)")  # bench's own literal name
            await conn.execute(f"INSERT INTO {TABLE} VALUES (1)")
        for _ in range(2):  # warm-up, left out of the figures
            await timed_run(b, plan(steps, True), record=False)
            await timed_run(b, plan(steps, False), record=False)
        g: list[float] = []
        u: list[float] = []
        for _ in range(pairs):
            u.append(await timed_run(b, plan(steps, False)))
            g.append(await timed_run(b, plan(steps, True)))
    gm, um = statistics.median(g) / steps * 1000, statistics.median(u) / steps * 1000
    print(f"steps per plan: {steps}, pairs: {pairs}")
    print(f"unguarded per step: median {um:.1f} ms  (runs: {[round(x, 3) for x in u]} s)")
    print(f"guarded   per step: median {gm:.1f} ms  (runs: {[round(x, 3) for x in g]} s)")
    probes = statistics.median(PROBE_MS)
    print(
        f"of which inside the probes ({statistics.median(PROBE_CALLS):.1f} probe calls a step, "
        f"fused reads shared): median {probes:.1f} ms a step; "
        f"the rest of the difference: {gm - um - probes:.1f} ms a step"
    )
    ctu, wf = statistics.median(CHECK_TO_USE_MS), statistics.median(WORKFLOW_READ_MS)
    print(
        f"check-to-use (the read the tool acted on -> tool start): p50 {ctu:.2f} ms, "
        f"max {max(CHECK_TO_USE_MS):.2f} ms over {len(CHECK_TO_USE_MS)} steps"
    )
    print(
        f"  the workflow's read before the call -> tool start: p50 {wf:.2f} ms (the call's "
        f"dispatch); check at the call / workflow's read: {ctu / wf:.3f}"
    )
    ratios = [a / b for a, b in zip(g, u, strict=True)]
    print(
        f"guarded/unguarded per-step ratio: median {statistics.median(ratios):.2f} "
        f"(pairs: {[round(r, 2) for r in ratios]})"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    asyncio.run(main(a.pairs, a.steps))
