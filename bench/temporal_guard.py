"""What ``plangate.temporal`` costs a team's own workflows (issue 37): the team's workflows
(``bench._team_workflow``) on two workers of one process, one with ``PlangatePlugin`` and one
without, on one embedded stack, the kinds interleaved round by round (their order rotating):

- (a) ``guarded``: a workflow calling ``stamp_object`` (a small S3 put) once, on the worker with
  the plugin, whose guard table gives it one pre condition (``object_exists`` of a source
  object) and one post condition (``object_exists`` of the object it writes), effect ``write``
  (so its effect ledger row too); against ``unguarded``: the same workflow and activity on the
  worker without the plugin. Goal: at most 1.15x p50. And (issue 50) against ``by hand``: the
  same put with the same two reads (a HEAD each, the pre before and the post after) and the
  same intent and outcome rows in a ledger table of the team's own, written by hand in the
  activity (``bench._by_hand``), on the worker without the plugin. Goal: guarded / by hand at
  most 1.10 p50.
- (b) ``plugin, not in table``: a workflow calling ``count_rows`` (answers its argument), which
  the guard table does not name, on the worker with the plugin; against ``no plugin``: the same
  on the worker without it. Goal: within 2%.

Each sample is one workflow, the team's client's start to its result (``--calls`` activity
calls a workflow, default 1). p50 and p90 of each kind, their ratios, the added milliseconds;
CPU a workflow by process (this one, the Temporal server, Postgres); from the histories of the
last workflows of each kind, where the time went (inside workflow tasks, inside activity tasks,
between them) and events, bytes and Temporal Cloud actions; for the guarded kind, the time its
probes took as its report says.

    .venv/bin/python -m bench.temporal_guard [--rounds 400] [--calls 1]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.worker import Worker

from bench._by_hand import StampsByHand, all_done, create_ledger
from bench._cpu import StackCpu
from bench._stack import bench_stack
from bench._team_workflow import (
    COUNT,
    STAMP,
    CountWorkflow,
    Stamp,
    StampByHandWorkflow,
    StampWorkflow,
)
from bench.bare import Shape, shape
from plangate.client.api import Plangate
from plangate.temporal import PlangatePlugin
from plangate.testing import history_events, s3_client

GUARDED, UNGUARDED, BY_HAND = "guarded", "unguarded", "by hand"
PLUGIN, NO_PLUGIN = "plugin, not in table", "no plugin"
KINDS = (GUARDED, UNGUARDED, BY_HAND, PLUGIN, NO_PLUGIN)
WARMUP = 8  # rounds left out of the figures
READ_BACK = 20  # the last workflows of each kind whose histories are read
TABLE: dict[str, Any] = {"activities": {STAMP: {
    "effect": "write",
    "pre": [{"probe": "object_exists", "from_args": {"bucket": "bucket", "key": "source"}}],
    "post": [{"probe": "object_exists", "from_args": {"bucket": "bucket", "key": "key"}}],
}}}


class TeamActivities:
    """The team's activities: nothing here knows of plangate."""

    def __init__(self, s3: Any) -> None:
        self.s3 = s3

    @activity.defn(name=STAMP)
    async def stamp_object(self, s: Stamp) -> str:
        await asyncio.to_thread(self.s3.put_object, Bucket=s.bucket, Key=s.key, Body=b"ok")
        return s.key

    @activity.defn(name=COUNT)
    async def count_rows(self, n: int) -> int:
        return n


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(rounds: int, calls: int) -> None:
    async with bench_stack() as b:
        s3 = s3_client(b.env)
        bucket = f"team-{uuid.uuid4().hex[:10]}"
        s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket=bucket, Key="source", Body=b"there")
        # the team's own client: its default data converter, none of plangate's
        team = await Client.connect(b.settings.temporal.address,
                                    namespace=b.settings.temporal.namespace)
        acts = TeamActivities(s3)
        async with await psycopg.AsyncConnection.connect(b.database_url, autocommit=True) as conn:
            await create_ledger(conn)
        by_hand = StampsByHand(await b.world.pool(), s3)
        tag = uuid.uuid4().hex[:8]
        with_q, bare_q = f"team-plugin-{tag}", f"team-bare-{tag}"
        plugin = PlangatePlugin(TABLE, settings=b.settings, principal="bench-team")
        common: dict[str, Any] = {
            "workflows": [StampWorkflow, StampByHandWorkflow, CountWorkflow],
            "activities": [acts.stamp_object, by_hand.stamp_object, acts.count_rows]}
        async with Worker(team, task_queue=with_q, plugins=[plugin], **common), \
                Worker(team, task_queue=bare_q, **common):

            def stamps(queue: str, by_hand: bool = False) -> Callable[[], Awaitable[str]]:
                workflow = StampByHandWorkflow.run if by_hand else StampWorkflow.run

                async def go() -> str:
                    wf = f"stamp-{uuid.uuid4().hex[:12]}"
                    arg = [Stamp(bucket, "source", f"out/{wf}-{i}") for i in range(calls)]
                    done = await team.execute_workflow(workflow, arg, id=wf, task_queue=queue)
                    if done != calls:
                        raise SystemExit(f"{wf} stamped {done} of {calls}")
                    return wf
                return go

            def counts(queue: str) -> Callable[[], Awaitable[str]]:
                async def go() -> str:
                    wf = f"count-{uuid.uuid4().hex[:12]}"
                    done = await team.execute_workflow(CountWorkflow.run, calls, id=wf,
                                                       task_queue=queue)
                    if done != calls * (calls - 1) // 2:
                        raise SystemExit(f"{wf} counted {done}")
                    return wf
                return go

            runs = {GUARDED: stamps(with_q), UNGUARDED: stamps(bare_q),
                    BY_HAND: stamps(bare_q, by_hand=True),
                    PLUGIN: counts(with_q), NO_PLUGIN: counts(bare_q)}
            cpu = StackCpu(b.settings.temporal.address, b.database_url)
            spent: dict[str, dict[str, float]] = {k: defaultdict(float) for k in KINDS}
            took: dict[str, list[float]] = {k: [] for k in KINDS}
            ids: dict[str, list[str]] = {k: [] for k in KINDS}
            began = time.perf_counter()
            for r in range(WARMUP + rounds):
                order = KINDS[r % len(KINDS):] + KINDS[:r % len(KINDS)]
                for kind in order:
                    c0 = cpu.seconds()
                    t0 = time.perf_counter()
                    wf = await runs[kind]()
                    ms = (time.perf_counter() - t0) * 1000
                    if r < WARMUP:
                        continue
                    took[kind].append(ms)
                    for part, sec in cpu.seconds().items():
                        spent[kind][part] += sec - c0[part]
                    ids[kind].append(wf)
            wall = time.perf_counter() - began
            histories = {k: [await history_events(team, wf) for wf in v[-READ_BACK:]]
                         for k, v in ids.items()}
            probes = await probe_ms(Plangate(b.client, b.settings), ids[GUARDED][-READ_BACK:])
        ledgered = await all_done(b.database_url)
    report(rounds, calls, wall, took, spent, histories, probes)
    print(f"by hand: {ledgered} rows in its ledger, every one done with its output")


def _ms(a: HistoryEvent, b: HistoryEvent) -> float:
    return (b.event_time.ToDatetime() - a.event_time.ToDatetime()).total_seconds() * 1000


def phases(events: list[HistoryEvent]) -> tuple[float, float, float]:
    """Milliseconds of one history inside workflow tasks (started -> completed), inside
    activity tasks (scheduled -> completed: dispatch, the call, its answer) and the rest
    (between them: a workflow task waiting to be picked up, the client's start)."""
    opened: dict[int, HistoryEvent] = {}
    in_wft = in_act = 0.0
    for e in events:
        t = e.event_type
        if t in (EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
                 EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED):
            opened[e.event_id] = e
        elif t == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            in_wft += _ms(opened[e.workflow_task_completed_event_attributes.started_event_id], e)
        elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            a = e.activity_task_completed_event_attributes
            in_act += _ms(opened[a.scheduled_event_id], e)
    return in_wft, in_act, _ms(events[0], events[-1]) - in_wft - in_act


async def probe_ms(api: Plangate, ids: list[str]) -> list[float]:
    """Per guarded workflow, the milliseconds its probes took as its report says (the pre
    condition read by the check local activity, the post condition by the read after)."""
    out = []
    for wf in ids:
        rep = await api.report(wf)
        out.append(sum(c.elapsed_ms or 0.0 for s in rep.steps for c in s.checks))
    return out


def report(rounds: int, calls: int, wall: float, took: dict[str, list[float]],
           spent: dict[str, dict[str, float]], histories: dict[str, list[list[HistoryEvent]]],
           probes: list[float]) -> None:
    print(f"team workflows of {calls} activity call(s), {rounds} rounds (+{WARMUP} warm-up), "
          f"kinds interleaved, order rotating; one workflow = team client start -> result; "
          f"{wall:.0f} s")
    for kind in KINDS:
        v = took[kind]
        print(f"  {kind:<22} p50 {pct(v, 0.5):6.2f} ms  p90 {pct(v, 0.9):6.2f} ms  "
              f"p99 {pct(v, 0.99):7.2f} ms  max {max(v):7.1f} ms  ({len(v)} workflows)")

    def ratios(label: str, a: str, b: str, goal: str) -> None:
        x, y = took[a], took[b]
        p50, p90 = pct(x, 0.5) / pct(y, 0.5), pct(x, 0.9) / pct(y, 0.9)
        added = pct(x, 0.5) - pct(y, 0.5)
        print(f"{label}: {a} / {b}  p50 {p50:.3f}  p90 {p90:.3f}  "
              f"(p50 {added:+.2f} ms a workflow)   goal: {goal}")

    ratios("(a) the guard", GUARDED, UNGUARDED, "p50 <= 1.15")
    ratios("(a) issue 50, the guard's machinery", GUARDED, BY_HAND, "p50 <= 1.10")
    ratios("    the guard's reads and rows", BY_HAND, UNGUARDED, "none (what the guard costs)")
    if probes:
        print(f"    the guarded call's probes (pre + post, as its report says): p50 "
              f"{statistics.median(probes):.2f} ms a workflow, of {len(probes)}")
    ratios("(b) the plugin on an activity it does not guard", PLUGIN, NO_PLUGIN,
           "within 2%")
    print("CPU a workflow, by process (summed over the rounds):")
    for kind in KINDS:
        n = len(took[kind])
        parts = "  ".join(f"{part} {sec / n * 1000:5.2f} ms" for part, sec in spent[kind].items())
        print(f"  {kind:<22} {parts}")
    n = min(len(h) for h in histories.values())
    print(f"from the histories of the last {n} of each kind, p50 ms a workflow: inside workflow "
          "tasks / inside activity tasks (scheduled -> completed) / the rest (first to last "
          "event)")
    for kind in KINDS:
        ph = [phases(h) for h in histories[kind]]
        wft, act, rest = (statistics.median(p[i] for p in ph) for i in range(3))
        print(f"  {kind:<22} {wft:6.2f} / {act:6.2f} / {rest:6.2f}")
    print("one history of each:")
    for kind in KINDS:
        s: Shape = shape(histories[kind][-1])
        print(f"  {kind:<22} {s.events:3d} events  {s.bytes / 1024:5.2f} KiB  {s.actions} "
              f"actions  {dict(s.by_kind)}")


def _args() -> Any:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=400,
                    help="rounds measured, each one workflow of every kind (default 400)")
    ap.add_argument("--calls", type=int, default=1,
                    help="activity calls a workflow (default 1)")
    return ap.parse_args()


if __name__ == "__main__":
    a = _args()
    asyncio.run(main(a.rounds, a.calls))
