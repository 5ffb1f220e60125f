"""``plangate index rebuild``: plangate's runs index (``world.run_index``) written again from
Temporal, the source of truth: every plan run of the deployment visibility lists (the queued
ones aside: a run's row begins with it), its status as ``plangate runs`` shows it, and the
cards of those awaiting approval as the card list reads them from Temporal. Rows of runs
Temporal no longer lists are deleted. An operator's command, with the deployment's Postgres
role: what the readers count against Temporal is then equal again."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.client import Client

from plangate.client import listings, pending
from plangate.client.paging import pages
from plangate.records.report import RunStatus
from plangate.records.run_index import IndexRow
from plangate.world import run_index
from plangate.world.clients import World

_STATUSES = {s.value: s for s in RunStatus}


@dataclass(frozen=True)
class Rebuilt:
    written: int
    deleted: int
    unanswered: list[str]  # runs awaiting approval whose cards could not be read: no cards


async def rebuild(client: Client, world: World, queue: str) -> Rebuilt:
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT now()")
        got = await cur.fetchone()
    assert got is not None  # (SELECT now() returns a row)
    since = got[0]  # rows not written from here on and not listed: gone from Temporal
    waiting = await pending.pending_approvals(client, queue, True)
    cards: dict[str, list[pending.PendingCard]] = {}
    for c in waiting.cards:
        cards.setdefault(c.run_id, []).append(c)
    rows: list[run_index.Rebuilt] = []
    async for page in pages(client, listings.runs_query(queue, plan_runs_only=True)):
        for e in page:
            seen = listings.listed(e, queue)
            status = _STATUSES.get(seen.status) if seen is not None else None
            if seen is None or status is None:
                continue  # (no status of its own: an execution that continued as new)
            mine = [c.record for c in cards.get(seen.run_id, [])]
            row = IndexRow(status=status, goal=seen.goal, cards=mine,
                           started_at=seen.started_at, seq=0)
            rows.append((seen.run_id, e.execution.run_id, row, seen.closed_at))
    written, deleted = await run_index.rebuilt(world, queue, rows, since)
    return Rebuilt(written, deleted, waiting.unanswered)
