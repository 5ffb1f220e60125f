"""``plangate report`` reads finished runs from the deployment's Postgres (``plangate.windows``,
a row each run's worker wrote as it ended) in one query, and from Temporal's visibility only what
the table does not hold: the report from the ledger is the report from visibility, on the same
real runs (succeeded, failed, approved after the world moved, queued, continued as new)."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from temporalio import activity
from temporalio.api.enums.v1 import EventType

from plangate.cli import main
from plangate.client import report_runs, reporting
from plangate.client.api import Plangate
from plangate.client.staleness import Finished, per_tool
from plangate.records.interface import WINDOWS_ACTIVITY
from plangate.records.windows import WindowsRow
from plangate.testing import Harness, running_worker
from plangate.world.clients import World
from plangate.world.settings import Settings
from tests.test_staleness import approve_after_a_move, publish

H = timedelta(hours=1)


def job_plan(job: str, state: str) -> dict[str, Any]:
    """A job row written, then read back wanting ``done``: failed where ``state`` is not."""
    return {"goal": f"job {state}", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": job, "state": state}},
         "post": [{"probe": "job_state", "job_id": job, "want": "done"}]}]}


def long_plan(steps: int) -> dict[str, Any]:
    return {"goal": "many steps", "budget": {"replans_max": 0}, "steps": [
        {"n": n, "tool": "warehouse.run_sql", "args": {"statement": "select_one"},
         **({"depends_on": [n - 1]} if n > 1 else {})} for n in range(1, steps + 1)]}


def ordered(runs: list[Finished]) -> list[Finished]:
    return sorted(runs, key=lambda f: (f.run_id, f.status, len(f.calls)))


async def rows(url: str, queue: str) -> list[tuple[str, str, str]]:
    async with await psycopg.AsyncConnection.connect(url) as c:
        cur = await c.execute("SELECT execution, workflow_id, status FROM plangate.windows "
                              "WHERE deployment = %s ORDER BY closed_at", (queue,))
        return [(a, b, s) for a, b, s in await cur.fetchall()]


async def both(h: Harness, world: World, since: datetime, n: int
               ) -> tuple[report_runs.Gathered, list[Finished]]:
    """The runs from the ledger and from visibility alone, once visibility lists ``n``."""
    queue = h.settings.temporal.task_queue
    for _ in range(100):  # visibility catches up with a close within a moment
        seen = await reporting.finished_runs(h.client, since, queue)
        if len(seen) >= n:
            break
        await asyncio.sleep(0.1)
    return await report_runs.gathered(h.client, world, since, queue), seen


async def test_the_report_from_the_ledger_is_the_report_from_visibility(
    client, settings, stack, s3, monkeypatch, capsys
):
    bucket = f"led-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="figures.txt", Body=b"v1")
    written = datetime.now(UTC) - 8 * H
    since = datetime.now(UTC) - timedelta(seconds=1)
    # a low bound on the history: the long plan continues as new on the way
    low = replace(settings, runs=replace(settings.runs, history_events=200))
    async with running_worker(client, low) as h:
        api = Plangate(client, h.settings)
        queue = h.settings.temporal.task_queue
        night = await api.submit(publish(bucket, "night.txt", written, approval=False),
                                 start_in=timedelta(seconds=1))
        card = await api.submit(publish(bucket, "figures.txt", written, approval=True))
        await approve_after_a_move(api, s3, bucket, card.id)
        reps = [await night.result(), await card.result(),
                await h.run(job_plan(f"ok-{uuid.uuid4().hex[:6]}", "done")),
                await h.run(job_plan(f"no-{uuid.uuid4().hex[:6]}", "failed")),
                await h.run(long_plan(30))]
        chain = [e async for e in client.list_workflows(f'WorkflowId = "{reps[-1].run_id}"')]
        world = World(h.settings.world)
        try:
            got, seen = await both(h, world, since, len(reps))
        finally:
            await world.close()
        env = {**stack.env(), "PLANGATE_TASK_QUEUE": queue}
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        outs = []
        for flags in ([], ["--visibility"]):
            assert await asyncio.to_thread(main, ["report", "--since", "1h", "--json", *flags]) == 0
            captured = capsys.readouterr()
            assert captured.err == ""  # nothing to say: the ledger was read
            out = json.loads(captured.out)
            del out["since"]  # (now - 1h, a moment apart)
            outs.append(out)
    assert [r.status for r in reps] == ["succeeded", "succeeded", "succeeded", "failed",
                                        "succeeded"]
    assert len(chain) > 1  # the long run went on in new executions
    # a row per run, of the execution that ended it
    kept = await rows(stack.database_url, queue)
    assert sorted(w for _, w, _ in kept) == sorted(r.run_id for r in reps)
    assert {e.run_id for e in chain} & {x for x, _, _ in kept} == {chain[0].run_id}  # the last
    assert got.from_ledger == len(reps) and got.note is None
    assert ordered(got.runs) == ordered(seen)
    assert [t.json() for t in per_tool(got.runs)] == [t.json() for t in per_tool(seen)]
    failed = next(f for f in got.runs if f.status == "failed")
    assert [c.tool for c in failed.calls] == ["warehouse.run_sql"]
    assert sum(c.changes for f in got.runs for c in f.calls) >= 1  # the superseded card
    assert outs[0] == outs[1] and outs[0]["runs"] == len(reps)


async def test_runs_closed_before_the_mark_come_from_visibility(client, settings, stack):
    since = datetime.now(UTC) - timedelta(seconds=1)
    async with running_worker(client, settings) as h:
        queue = h.settings.temporal.task_queue
        reps = [await h.run(job_plan(f"m-{uuid.uuid4().hex[:6]}", "done")) for _ in range(3)]
        kept = await rows(stack.database_url, queue)
        # as if the first two ran before any worker wrote rows: the mark after them, no rows
        async with await psycopg.AsyncConnection.connect(stack.database_url) as c:
            await c.execute("UPDATE plangate.windows_since SET since = w.closed_at "
                            "FROM plangate.windows w WHERE w.execution = %s "
                            "AND plangate.windows_since.deployment = %s", (kept[2][0], queue))
            await c.execute("DELETE FROM plangate.windows WHERE execution = ANY(%s)",
                            ([kept[0][0], kept[1][0]],))
            cur = await c.execute("SELECT since FROM plangate.windows_since "
                                  "WHERE deployment = %s", (queue,))
            [(mark,)] = await cur.fetchall()
        world = World(h.settings.world)
        try:
            got, seen = await both(h, world, since, len(reps))
            # a period that begins at the mark: the rows alone (the run closed after it)
            later, _ = await both(h, world, mark - timedelta(microseconds=1), 0)
        finally:
            await world.close()
    assert len(await rows(stack.database_url, queue)) == 1
    assert got.from_ledger == 1 and len(got.runs) == 3
    assert ordered(got.runs) == ordered(seen)
    assert sorted(f.run_id for f in got.runs) == sorted(r.run_id for r in reps)
    assert later.from_ledger == len(later.runs) == 1


async def test_a_run_with_no_row_after_the_mark_sends_the_report_to_visibility(
    client, settings, stack
):
    """A run that closed without its row (Postgres down past ``windows.record``'s patience):
    visibility counts more runs than the rows, so every run is read from visibility, said."""
    since = datetime.now(UTC) - timedelta(seconds=1)
    async with running_worker(client, settings) as h:
        queue = h.settings.temporal.task_queue
        reps = [await h.run(job_plan(f"n-{uuid.uuid4().hex[:6]}", "done")) for _ in range(3)]
        kept = await rows(stack.database_url, queue)
        async with await psycopg.AsyncConnection.connect(stack.database_url) as c:
            await c.execute("DELETE FROM plangate.windows WHERE execution = %s", (kept[1][0],))
        world = World(h.settings.world)
        try:
            got, seen = await both(h, world, since, len(reps))
        finally:
            await world.close()
    assert len(await rows(stack.database_url, queue)) == 2
    assert got.from_ledger == 0 and got.note is not None
    assert got.note.startswith("1 of the 3 runs closed since"), got.note
    assert ordered(got.runs) == ordered(seen) and len(got.runs) == 3


async def test_an_end_written_twice_is_one_row(client, settings, stack):
    """The row's write retried after it committed (the answer lost): the first row stays, no
    second; the run's history holds one marker for it."""
    from plangate.activities.windows import WindowsActivities

    tries: list[int] = []

    def lost_answer(s: Settings, world: World) -> Any:
        real = WindowsActivities(world, s.temporal.task_queue).record

        @activity.defn(name=WINDOWS_ACTIVITY)
        async def record(row: WindowsRow) -> None:
            await real(row)
            tries.append(1)
            if len(tries) == 1:
                raise RuntimeError("the answer was lost")
        return record

    queue = f"test-{uuid.uuid4().hex[:8]}"
    s = replace(settings, temporal=replace(settings.temporal, task_queue=queue))
    world = World(s.world)
    try:
        async with running_worker(client, settings, {WINDOWS_ACTIVITY: lost_answer(s, world)},
                                  queue=queue) as h:
            rep = await h.run(job_plan(f"t-{uuid.uuid4().hex[:6]}", "done"))
    finally:
        await world.close()
    assert rep.status == "succeeded" and len(tries) == 2
    kept = await rows(stack.database_url, queue)
    assert [(w, st) for _, w, st in kept] == [(rep.run_id, "succeeded")]
    markers = [e async for e in client.get_workflow_handle(rep.run_id).fetch_history_events()
               if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
               and WINDOWS_ACTIVITY.encode() in e.SerializeToString()]
    assert len(markers) == 1


async def test_without_postgres_the_report_reads_visibility_and_says_so(client, settings):
    since = datetime.now(UTC) - timedelta(seconds=1)
    async with running_worker(client, settings) as h:
        rep = await h.run(job_plan(f"d-{uuid.uuid4().hex[:6]}", "done"))
        down = World(replace(h.settings.world, database_url="postgresql://nobody@127.0.0.1:9/x"))
        try:
            got, seen = await both(h, down, since, 1)
        finally:
            await down.close()
    assert [f.run_id for f in got.runs] == [rep.run_id] and got.runs == seen
    assert got.from_ledger == 0
    assert got.note is not None and "every run read from Temporal's visibility" in got.note
