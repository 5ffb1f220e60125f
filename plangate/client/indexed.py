"""The open runs read from plangate's runs index (``world.run_index``) where it is current, from
Temporal's visibility where it is not, and said so.

The index is where to look, never what decides: a card shown from it is answered through its
run (the Update checks the digest as ever), and its cards pass the memo's check
(``records.cards.trusted``). Whether it is current is asked of Temporal each time by counting
(one ``CountWorkflowExecutions``, no listing): the runs awaiting approval for the card list;
for ``plangate runs``, the runs started since the oldest it lists. Where Temporal counts
otherwise (a row lost, late, or left behind by a run Temporal ended), every run is read from
Temporal as before the index, and the answer says how many the index had wrong. Counting
does not see two errors that cancel out (a row lost and another left awaiting): ``plangate
index rebuild`` writes the index again from Temporal."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC

import psycopg
from psycopg_pool import PoolTimeout
from temporalio.client import Client

from plangate.client import listings, pending
from plangate.client.listings import Listed
from plangate.plans.words import many
from plangate.records.cards import CardsMemo, trusted
from plangate.records.report import RunStatus
from plangate.world import run_index
from plangate.world.clients import World

UNREADABLE: tuple[type[BaseException], ...] = (psycopg.Error, PoolTimeout, OSError)
REBUILD = "`plangate index rebuild` writes the index again from Temporal"


def first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def unread(e: BaseException) -> str:
    """Why the index was not read, in words: a deployment whose tables nobody has made yet
    (no worker has started: its first hour) is told so, not shown Postgres's error."""
    if isinstance(e, psycopg.errors.UndefinedTable):
        return ("the runs index is not in Postgres yet (a worker, or `plangate setup`, makes "
                "plangate's tables)")
    return f"the runs index could not be read ({first_line(e)})"


async def cards(client: Client, world: World, queue: str, page_size: int
                ) -> pending.Found | tuple[str, list[run_index.Waiting] | None]:
    """The cards of the runs the index shows awaiting approval, with the guarded team
    workflows' from visibility (a team's worker writes no row); else why the index is not
    read, and its rows where it could be."""
    guarded = asyncio.ensure_future(
        pending.listing(client, pending.GUARDED_AWAITING, queue, True, page_size))
    try:
        try:
            rows = await run_index.waiting(world, queue)
        except UNREADABLE as e:
            return unread(e), None
        counted = (await client.count_workflows(pending.plan_runs_awaiting(queue))).count
        if counted != len(rows):
            return (f"the runs index shows {many(len(rows), 'run')} awaiting approval, Temporal "
                    f"{counted}; {REBUILD}"), rows
        found = await guarded
    finally:
        guarded.cancel()  # (done, or not wanted: every run is read from visibility)
    for w in rows:
        memo = CardsMemo(execution=w.execution, goal=w.goal,
                         cards=run_index.CARDS.validate_json(w.cards))
        records = trusted(memo, w.workflow_id, w.execution)
        if records is None:  # not what the run's code writes: the run is asked
            found.ask.append(w.workflow_id)
            continue
        found.indexed += 1
        found.cards += [pending.PendingCard(run_id=w.workflow_id, goal=w.goal, record=a)
                        for a in records]
    found.listed += len(rows)
    return found


def behind(rows: list[run_index.Waiting], listed: dict[str, frozenset[str]]) -> int:
    """How many runs the index had wrong against Temporal's ``listed`` (each plan run awaiting
    approval and its cards' digests): missing, other cards, or awaiting where Temporal says
    not."""
    mine = {w.workflow_id: frozenset(c["digest"] for c in json.loads(w.cards)) for w in rows}
    wrong = sum(1 for run_id, digests in listed.items() if mine.get(run_id) != digests)
    return wrong + sum(1 for run_id in mine if run_id not in listed)


async def runs(client: Client, world: World, queue: str, status: RunStatus | None, limit: int
               ) -> tuple[list[Listed], int] | str:
    """The ``limit`` runs started last (in ``status``) from the index, with the guarded team
    workflows' from visibility, and how many came from the index; else why the index is not
    read (every run is then listed from Temporal)."""
    team = asyncio.ensure_future(listings.runs(client, queue, True, status, limit,
                                               unindexed=True))
    try:
        try:
            rows = await run_index.listed(world, queue, status, limit)
            # a full page: the runs started since its oldest; else every run the index holds
            since = rows[-1].started_at if len(rows) == limit else None
            mine = len(rows) if since is None else await run_index.counted(
                world, queue, status, since)
        except UNREADABLE as e:
            return unread(e)
        counted = (await client.count_workflows(
            listings.runs_query(queue, status, plan_runs_only=True, since=since))).count
        if counted != mine:
            return (f"the runs index holds {many(mine, 'run')}{_in(status)}{_since(since)}, "
                    f"Temporal {counted}; {REBUILD}")
        others = await team
    finally:
        team.cancel()
    out = [Listed(run_id=r.workflow_id, status=r.status, goal=r.goal,
                  started_at=r.started_at.astimezone(UTC),
                  closed_at=r.closed_at.astimezone(UTC) if r.closed_at else None)
           for r in rows]
    return listings.newest_first(out + others)[:limit], len(rows)


def _in(status: RunStatus | None) -> str:
    return "" if status is None else f" {status.value}"


def _since(since: object) -> str:
    return "" if since is None else f" started since {since}"
