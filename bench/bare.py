"""A guarded step against what a team would write by hand (issue 23): plangate guarded,
plangate unguarded and a hand-written Temporal workflow (``bench._bare_workflow``: one
``execute_activity`` a step) doing the same Postgres write, on one dev server and one worker
process, alternating.

And (issue 50) "by hand": the hand-written workflow's step doing, in its one activity, what the
guarded step does for the same write: the same pre read, an intent row, the write, an outcome
row and the same post read, with psycopg directly (``bench._by_hand`` says which statement
stands for which of plangate's). Printed side by side: guarded / by hand (goal at most 1.10),
guarded / hand-written (at most 1.25), this process's CPU a step guarded / by hand (at most
1.25x) and by hand / hand-written (what the guard costs physically: its reads and rows); and
each ratio per round (each round's kinds run back to back, so a round's ratio drifts less with
the machine's load than the medians').

Two more kinds run the guarded chain on workers of the same stack whose deployments have Cedar
policies (``POLICIES``): guarded+policy (each call decided at the worker's guards and at the
call) and guarded+totals (its policy reads the running totals: each write decided against them
under the effect ledger's lock, in the intent's transaction).

Per step, each kind's time is (a 31-step chain - a 1-step chain) / 30 from the client's start to
its result, so what every run pays once (start, first and last workflow task) is left out;
medians over ``--pairs`` rounds. Then, from one history of each chain: events, bytes (the
events as Temporal stores them, serialized) and Temporal Cloud actions per step, counted from
the history as Temporal documents them (docs.temporal.io/cloud/actions): a workflow start, each
activity start or retry, each timer, each search-attribute upsert (and each memo upsert, counted
alike: the list does not name it), each signal and accepted
update, each side-effect marker, and every local activity marker of one workflow task together
as one; patch markers none. Queries are not in a history and not counted (this bench makes
none).

And where the time goes: CPU time per step of this process (client, worker, activities), the
Temporal server and Postgres, each kind's (31-step - 1-step) / 30 summed over the rounds.

    .venv/bin/python -m bench.bare [--pairs 7] [--steps 31]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.worker import Interceptor, Worker

from bench._bare_workflow import SET_JOB, BareChain, ByHandChain, Chain, GuardedChain, JobWrite
from bench._by_hand import JobsByHand, all_done, create_ledger
from bench._cpu import THIS, StackCpu
from bench._stack import Bench, bench_stack
from bench.guard_cost import TABLE, plan
from plangate.activities.tools._statements import SET_JOB as SET_JOB_SQL
from plangate.testing import Harness, history_events, running_worker

# "guarded (worker 2)": the guarded chain on a second worker like the policed kinds' and with no
# policies: what they are compared with (a worker beside the stack's own costs ~0.8 ms a step
# of its own in this one process)
# "guarded (no door)": the same on a third worker whose door lets every call in (no seal made
# or verified, issue 46): what the door costs, beside "guarded (worker 2)"
KINDS = ("guarded", "guarded (worker 2)", "guarded (no door)", "guarded+policy",
         "guarded+totals", "unguarded", "by hand", "hand-written")
# the deployment's Cedar policies of the two policed kinds: a permissive base and a cap, every
# call decided at the worker's guards and at the call; the second's cap reads the running
# totals, so each write is decided against them under the ledger's lock
BASE = '@id("base")\npermit(principal, action, resource);\n'
POLICIES = {
    "guarded+policy": (BASE, '@id("cap")\nforbid(principal, action, resource)\n'
                             'when { context.amount_cents > 100000 };\n'),
    "guarded+totals": (BASE, '@id("hourly")\nforbid(principal, action, resource)\n'
                             'when { context.totals.amount_cents_hour + context.amount_cents '
                             '> 500000 };\n'),
}
LOCAL_MARKER = "core_local_activity"
PATCH_MARKER = "core_patch"


class Writes:
    """The hand-written workflow's one activity: the statement ``set_job_state`` runs."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench

    @activity.defn(name=SET_JOB)
    async def set_job(self, w: JobWrite) -> None:
        pool = await self.bench.world.pool()
        query = sql.SQL(SET_JOB_SQL).format(sql.Literal(w.job_id), sql.Literal(w.state),
                                            sql.Literal(w.owner))
        async with pool.connection() as conn:
            await conn.execute(query)


@dataclass(frozen=True)
class Shape:
    events: int
    bytes: int
    actions: int
    by_kind: Counter[str]


def actions(events: list[HistoryEvent]) -> Counter[str]:
    """Temporal Cloud actions in a history, by kind (see the module's docstring)."""
    out: Counter[str] = Counter()
    local_tasks: set[int] = set()
    for e in events:
        t = e.event_type
        if t in (EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
                 EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW):
            out["workflow started"] += 1
        elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            out["activity started or retried"] += max(1, e.activity_task_started_event_attributes
                                                     .attempt)
        elif t == EventType.EVENT_TYPE_TIMER_STARTED:
            out["timer started"] += 1
        elif t == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            out["search attributes upserted"] += 1
        elif t == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
            out["memo upserted"] += 1  # counted as an upsert is: the list does not say
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            out["signal"] += 1
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            out["update"] += 1
        elif t == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            out["child workflow"] += 2
        elif t == EventType.EVENT_TYPE_MARKER_RECORDED:
            m = e.marker_recorded_event_attributes
            if m.marker_name == LOCAL_MARKER:
                local_tasks.add(m.workflow_task_completed_event_id)
            elif m.marker_name != PATCH_MARKER:
                out["side effect"] += 1
    if local_tasks:
        out["local activities (one a workflow task)"] = len(local_tasks)
    return out


def shape(events: list[HistoryEvent]) -> Shape:
    by_kind = actions(events)
    return Shape(len(events), sum(len(e.SerializeToString()) for e in events),
                 sum(by_kind.values()), by_kind)


def policed(b: Bench, texts: tuple[str, ...]) -> Any:
    """The bench's settings with a policy directory holding ``texts``."""
    directory = Path(tempfile.mkdtemp(prefix="bench-policies-"))
    for i, text in enumerate(texts):
        (directory / f"p{i}.cedar").write_text(text)
    return replace(b.settings, policy=replace(b.settings.policy, policies=directory))


async def main(pairs: int, steps: int) -> None:
    async with bench_stack() as b:
        async with await psycopg.AsyncConnection.connect(b.database_url, autocommit=True) as conn:
            await conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id int)")  # bench's own
            await conn.execute(f"INSERT INTO {TABLE} VALUES (1)")
            await create_ledger(conn)
        queue = f"bare-{uuid.uuid4().hex[:8]}"
        writes = Writes(b)
        by_hand = JobsByHand(await b.world.pool())
        ruled = {kind: policed(b, texts) for kind, texts in POLICIES.items()}
        async with Worker(b.client, task_queue=queue, workflows=[BareChain, ByHandChain],
                          activities=[writes.set_job, by_hand.set_job]), \
                running_worker(b.client, ruled["guarded+policy"], world=b.world) as capped, \
                running_worker(b.client, ruled["guarded+totals"], world=b.world) as totalled, \
                running_worker(b.client, b.settings, world=b.world) as second, \
                running_worker(b.client, b.settings, world=b.world, door=Interceptor()) as open_:

            async def hand(n: int) -> str:
                run_id = f"bare-{uuid.uuid4().hex[:12]}"
                done = await b.client.execute_workflow(
                    BareChain.run, Chain([f"bare-{run_id}-{i}" for i in range(n)], run_id),
                    id=run_id, task_queue=queue)
                if done != n:
                    raise SystemExit(f"{run_id} wrote {done} of {n}")
                return run_id

            async def guarded_by_hand(n: int) -> str:
                run_id = f"byhand-{uuid.uuid4().hex[:12]}"
                done = await b.client.execute_workflow(
                    ByHandChain.run,
                    GuardedChain([f"bare-{run_id}-{i}" for i in range(n)], run_id, TABLE, "id"),
                    id=run_id, task_queue=queue)
                if done != n:
                    raise SystemExit(f"{run_id} wrote {done} of {n}")
                return run_id

            def plangate(guarded: bool, h: Harness = b) -> Callable[[int], Awaitable[str]]:
                async def go(n: int) -> str:
                    rep = await h.run(plan(n, guarded))
                    if rep.status != "succeeded" or any(s.state != "DONE" for s in rep.steps):
                        raise SystemExit(f"{rep.run_id} did not run every step: {rep.status}")
                    return rep.run_id
                return go

            runs: dict[str, Callable[[int], Awaitable[str]]] = {
                "guarded": plangate(True), "guarded+policy": plangate(True, capped),
                "guarded+totals": plangate(True, totalled),
                "guarded (worker 2)": plangate(True, second),
                "guarded (no door)": plangate(True, open_),
                "unguarded": plangate(False), "by hand": guarded_by_hand,
                "hand-written": hand}

            cpu = StackCpu(b.settings.temporal.address, b.database_url)
            spent: dict[str, dict[str, float]] = {k: defaultdict(float) for k in KINDS}

            async def timed(kind: str, n: int, sign: int = 0) -> tuple[float, str]:
                """``sign``: +1 or -1 to add this run's CPU to (or take it from) its kind's."""
                c0 = cpu.seconds()
                began = time.perf_counter()
                run_id = await runs[kind](n)
                took = time.perf_counter() - began
                for part, sec in cpu.seconds().items():
                    spent[kind][part] += sign * (sec - c0[part])
                return took, run_id

            for kind in KINDS:  # warm-up, left out
                await timed(kind, steps)
                await timed(kind, 1)
            per_step: dict[str, list[float]] = {k: [] for k in KINDS}
            last: dict[str, tuple[str, str]] = {}
            for _ in range(pairs):
                for kind in KINDS:
                    long, long_id = await timed(kind, steps, +1)
                    short, short_id = await timed(kind, 1, -1)
                    per_step[kind].append((long - short) / (steps - 1) * 1000)
                    last[kind] = (long_id, short_id)
            shapes: dict[str, tuple[Shape, Shape]] = {}
            for kind, (long_id, short_id) in last.items():
                shapes[kind] = (shape(await history_events(b.client, long_id)),
                                shape(await history_events(b.client, short_id)))
        ledgered = await all_done(b.database_url)
    report(pairs, steps, per_step, shapes)
    print(f"by hand: {ledgered} rows in its ledger, every one done with its output")
    cpu_report(pairs, steps, spent)


def cpu_report(pairs: int, steps: int, spent: dict[str, dict[str, float]]) -> None:
    per = pairs * (steps - 1)
    print(f"CPU per step, by process (summed over the rounds, {steps}-step - 1-step runs):")
    for kind in KINDS:
        parts = "  ".join(f"{part} {ms / per * 1000:5.2f} ms" for part, ms in spent[kind].items())
        print(f"  {kind:<18} {parts}")
    shut, opened = spent["guarded (worker 2)"], spent["guarded (no door)"]
    print("  guarded (worker 2) / guarded (no door): " + ", ".join(
        f"{part} {shut[part] / opened[part]:.3f}" for part in opened if opened[part] > 0))
    hand = spent["hand-written"]
    for kind in KINDS[:-1]:
        ratios = ", ".join(f"{part} {spent[kind][part] / hand[part]:.2f}"
                           for part in hand if hand[part] > 0)
        print(f"  {kind} / hand-written: {ratios}")
    guarded, by_hand = spent["guarded"], spent["by hand"]
    ratios = ", ".join(f"{part} {guarded[part] / by_hand[part]:.2f}"
                       for part in by_hand if by_hand[part] > 0)
    print(f"  guarded / by hand: {ratios}")
    print(f"  issue 50: worker CPU a step ({THIS}), guarded / by hand "
          f"{guarded[THIS] / by_hand[THIS]:.2f}x (goal at most 1.25x); guarded / hand-written "
          f"{guarded[THIS] / hand[THIS]:.2f}x; by hand / hand-written "
          f"{by_hand[THIS] / hand[THIS]:.2f}x")


def report(pairs: int, steps: int, per_step: dict[str, list[float]],
           shapes: dict[str, tuple[Shape, Shape]]) -> None:
    med = {k: statistics.median(v) for k, v in per_step.items()}
    print(f"chains of {steps} and 1 steps, {pairs} rounds, kinds alternating; per step = "
          f"(t{steps} - t1) / {steps - 1}, client start -> result")
    for kind in KINDS:
        runs = ", ".join(f"{x:.1f}" for x in per_step[kind])
        print(f"  {kind:<18} median {med[kind]:6.1f} ms a step  (rounds: {runs})")
    hand = med["hand-written"]

    def ratio(a: str, b: str, goal: str = "") -> None:
        rounds = [x / y for x, y in zip(per_step[a], per_step[b], strict=True)]
        print(f"  {a} / {b}: {med[a] / med[b]:.2f} of the medians, median of the rounds' "
              f"{statistics.median(rounds):.2f} ({', '.join(f'{r:.2f}' for r in rounds)}){goal}")

    print("  issue 50:")
    ratio("guarded", "by hand", "   goal: at most 1.10")
    ratio("guarded", "hand-written", "   goal: at most 1.25")
    ratio("by hand", "hand-written", "   (the guard's reads and rows)")
    print(f"  by hand - hand-written: {med['by hand'] - hand:+.1f} ms a step; guarded - by hand: "
          f"{med['guarded'] - med['by hand']:+.1f} ms a step")
    print(f"  guarded / hand-written:   {med['guarded'] / hand:.2f}")
    print(f"  unguarded / hand-written: {med['unguarded'] / hand:.2f}")
    print(f"  guarded / unguarded:      {med['guarded'] / med['unguarded']:.2f}")
    second = med["guarded (worker 2)"]
    print(f"  guarded (worker 2) / guarded (no door): {second / med['guarded (no door)']:.3f}")
    print(f"  guarded+policy / guarded (worker 2): {med['guarded+policy'] / second:.3f}")
    print(f"  guarded+totals / guarded (worker 2): {med['guarded+totals'] / second:.3f}")
    print(f"per step, from the histories ({steps}-step chain - 1-step chain) / {steps - 1}:")
    per: dict[str, tuple[float, float, float]] = {}
    for kind in KINDS:
        long, short = shapes[kind]
        n = steps - 1
        per[kind] = ((long.events - short.events) / n, (long.bytes - short.bytes) / n,
                     (long.actions - short.actions) / n)
        ev, by, ac = per[kind]
        print(f"  {kind:<18} {ev:5.2f} events  {by / 1024:6.2f} KiB  {ac:5.2f} actions  "
              f"(whole {steps}-step run: {long.events} events, {long.bytes / 1024:.1f} KiB, "
              f"{long.actions} actions: {dict(long.by_kind)})")
    g, h = per["guarded"], per["hand-written"]
    print(f"  guarded - hand-written: {g[0] - h[0]:+.2f} events, {(g[1] - h[1]) / 1024:+.2f} "
          f"KiB, {g[2] - h[2]:+.2f} actions a step")


def _args() -> Any:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--steps", type=int, default=31)
    return ap.parse_args()


if __name__ == "__main__":
    a = _args()
    asyncio.run(main(a.pairs, a.steps))
