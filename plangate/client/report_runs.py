"""Where the staleness report's finished runs come from: the deployment's Postgres where it
holds them, Temporal's visibility where it does not.

Each plan run writes its windows to ``plangate.windows`` as it ends (``world.windows``), and
each deployment's ``plangate.windows_since`` says since when. The runs closed after
max(since, mark) are that table's, in one query; visibility is listed only for what the table
cannot hold: the team workflows plangate guards (``plangate.temporal``: a team's worker writes
no row), always, listed by ``GUARDED`` alone while Postgres is read; and the plan runs that
closed in [since, mark), before any worker wrote rows, only where the period reaches back
that far. Where Postgres cannot be read (down, the tables missing), or with no
deployment to read it for (``--all-queues``: another deployment's rows are in its own
Postgres), every run comes from visibility, as before the table, and ``Gathered.note`` says why.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg_pool import PoolTimeout
from temporalio.client import Client

from plangate.client import reporting
from plangate.client.staleness import Finished
from plangate.world import windows
from plangate.world.clients import World


@dataclass(frozen=True)
class Gathered:
    runs: list[Finished]
    from_ledger: int  # how many of ``runs`` came from Postgres
    note: str | None = None  # why visibility alone was read, where it was


async def gathered(client: Client, world: World | None, since: datetime,
                   task_queue: str | None) -> Gathered:
    """The runs finished after ``since`` on ``task_queue`` (None: any queue, from visibility),
    read from ``world``'s Postgres where it holds them (None: visibility alone, asked for)."""
    if world is None or task_queue is None:
        return Gathered(await reporting.finished_runs(client, since, task_queue), 0)
    # the guarded team workflows, listed while Postgres is read
    guarded = asyncio.ensure_future(reporting.listed(
        client, reporting.query(since, task_queue, plan_runs=False), task_queue))
    try:
        try:
            got = await windows.listed(world, task_queue, since)
        except (psycopg.Error, PoolTimeout) as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            why = f"the windows in Postgres could not be read ({first})"
            return await _visibility(client, since, task_queue, why)
        if got is None:
            why = f"no worker of {task_queue!r} has written windows to Postgres yet"
            return await _visibility(client, since, task_queue, why)
        # every plan run visibility counts closed since the rows begin has its row, or the
        # rows are not the whole story (a run that ended while Postgres was down past
        # ``windows.record``'s patience, a row deleted): then visibility's, every run
        start = max(since, got.mark)
        closed = (await client.count_workflows(
            reporting.query(start, task_queue, guarded=False))).count
        kept = len(got.rows)  # (a row written an instant before its run closed may be more)
        if closed > kept:
            why = (f"{closed - kept} of the {closed} runs closed since {start:%Y-%m-%d %H:%M:%S} "
                   "have no windows in Postgres")
            return await _visibility(client, since, task_queue, why)
        seen = await guarded
    finally:
        guarded.cancel()  # (done, or not wanted: every run is read from visibility)
    if since < got.mark:  # closed before any worker wrote rows: visibility's
        seen += await reporting.listed(
            client, reporting.query(since, task_queue, until=got.mark, guarded=False),
            task_queue)
    mine = {r.execution for r in got.rows}
    # a run with a row and a close time before the mark (the two clocks apart): counted once
    listed = [f for execution, f in seen if execution not in mine]
    return Gathered([Finished(r.workflow_id, r.status, r.calls) for r in got.rows] + listed,
                    len(got.rows))


async def _visibility(client: Client, since: datetime, task_queue: str, why: str) -> Gathered:
    runs = await reporting.finished_runs(client, since, task_queue)
    return Gathered(runs, 0, f"{why}: every run read from Temporal's visibility")
