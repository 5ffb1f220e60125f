"""plangate's own index of its runs, ``plangate.runs_index``: a row per run (its workflow id),
its status and the cards it waits on, written by the worker as they change
(``activities.run_index``), read by the card list and ``plangate runs`` instead of listing
every run from Temporal's visibility (``client.indexed``). Temporal stays the source of truth:
each reader counts the same runs in visibility and reads Temporal where the counts differ;
``rebuilt`` writes the rows again from Temporal's listing. Nothing is decided from a row.

- keyed by the workflow id: a run that continued as new keeps one row, its latest execution's;
- ``deployment``: the task queue of the writing worker's settings (never the run's say);
- ``started_at``, ``seq``: the execution's start (visibility's StartTime) and its history length
  at the write. A write replaces the row only where it is not older by these (a write owed
  while Postgres was away and paid after a newer one changes nothing; a reused workflow id's
  new run, started later, replaces the old);
- ``cards``: the pending ``ApprovalRecord`` list, as JSON; ``closed_at``: set by the run's last
  write (Postgres's clock), NULL while it is open;
- ``written_at``: when the row was last written, Postgres's clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from pydantic import TypeAdapter

from plangate.records.approvals import ApprovalRecord
from plangate.records.report import RunStatus
from plangate.records.run_index import IndexRow
from plangate.world.clients import World

CARDS: TypeAdapter[list[ApprovalRecord]] = TypeAdapter(list[ApprovalRecord])
FINAL = tuple(s.value for s in RunStatus if s.final)
AWAITING = RunStatus.AWAITING_APPROVAL.value

_RECORD = """
INSERT INTO plangate.runs_index AS r
    (workflow_id, execution, deployment, status, goal, cards, started_at, seq, closed_at)
VALUES (%(workflow_id)s, %(execution)s, %(deployment)s, %(status)s, %(goal)s,
        %(cards)s::jsonb, %(started_at)s, %(seq)s, CASE WHEN %(final)s THEN now() END)
ON CONFLICT (workflow_id) DO UPDATE SET
    execution = excluded.execution, deployment = excluded.deployment,
    status = excluded.status, goal = excluded.goal, cards = excluded.cards,
    started_at = excluded.started_at, seq = excluded.seq, closed_at = excluded.closed_at,
    written_at = now()
WHERE (excluded.started_at, excluded.seq) >= (r.started_at, r.seq)
"""


async def record(world: World, workflow_id: str, execution: str, deployment: str,
                 row: IndexRow) -> bool:
    """The run's row as ``row`` says; False where the index holds a newer one."""
    params = {"workflow_id": workflow_id, "execution": execution, "deployment": deployment,
              "status": row.status.value, "goal": row.goal,
              "cards": CARDS.dump_json(row.cards).decode(), "started_at": row.started_at,
              "seq": row.seq, "final": row.status.final}
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute(_RECORD, params)
        return bool(cur.rowcount == 1)


@dataclass(frozen=True)
class Waiting:
    """A run the index shows awaiting approval, its cards as the JSON the row holds."""

    workflow_id: str
    execution: str
    goal: str
    cards: str


async def waiting(world: World, deployment: str) -> list[Waiting]:
    """The runs of ``deployment`` the index shows awaiting approval, in one query."""
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT workflow_id, execution, goal, cards::text FROM plangate.runs_index "
            "WHERE deployment = %s AND status = %s", (deployment, AWAITING))
        return [Waiting(*r) for r in await cur.fetchall()]


@dataclass(frozen=True)
class Indexed:
    """A run as the index lists it (``plangate runs``)."""

    workflow_id: str
    execution: str
    status: str
    goal: str
    started_at: datetime
    closed_at: datetime | None


async def listed(world: World, deployment: str, status: RunStatus | None, limit: int
                 ) -> list[Indexed]:
    """The ``limit`` runs of ``deployment`` (in ``status``) started last, newest first."""
    where, params = _which(deployment, status)
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT workflow_id, execution, status, goal, started_at, closed_at "
            f"FROM plangate.runs_index WHERE {where} "
            "ORDER BY started_at DESC, workflow_id DESC LIMIT %(limit)s",
            {**params, "limit": limit})
        return [Indexed(*r) for r in await cur.fetchall()]


async def counted(world: World, deployment: str, status: RunStatus | None, since: datetime
                  ) -> int:
    """How many runs of ``deployment`` (in ``status``) the index holds started at or after
    ``since``."""
    where, params = _which(deployment, status)
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT count(*) FROM plangate.runs_index WHERE {where} "
            "AND started_at >= %(since)s", {**params, "since": since})
        got = await cur.fetchone()
        return int(got[0]) if got else 0


def _which(deployment: str, status: RunStatus | None) -> tuple[str, dict[str, object]]:
    if status is None:
        return "deployment = %(deployment)s", {"deployment": deployment}
    return ("deployment = %(deployment)s AND status = %(status)s",
            {"deployment": deployment, "status": status.value})


Rebuilt = tuple[str, str, IndexRow, datetime | None]  # workflow id, execution, row, closed


async def rebuilt(world: World, deployment: str, rows: Iterable[Rebuilt], since: datetime
                  ) -> tuple[int, int]:
    """The rows of ``deployment`` as Temporal lists its runs (workflow id, execution, row,
    close time), each written whatever the index held (its ``seq`` kept, so the run's next write
    still replaces it); the rows of runs Temporal no longer lists, written before ``since``
    (when the listing began), deleted. How many were written and deleted, in one
    transaction."""
    pool = await world.pool()
    written = 0
    async with pool.connection() as conn, conn.transaction():
        ids: list[str] = []
        for workflow_id, execution, row, closed in rows:
            ids.append(workflow_id)
            await conn.execute(
                "INSERT INTO plangate.runs_index AS r (workflow_id, execution, deployment, "
                "status, goal, cards, started_at, seq, closed_at) VALUES (%s, %s, %s, %s, %s, "
                "%s::jsonb, %s, 0, %s) "
                "ON CONFLICT (workflow_id) DO UPDATE SET execution = excluded.execution, "
                "deployment = excluded.deployment, status = excluded.status, "
                "goal = excluded.goal, cards = excluded.cards, "
                "started_at = excluded.started_at, "
                "seq = CASE WHEN r.execution = excluded.execution THEN r.seq ELSE 0 END, "
                "closed_at = excluded.closed_at, "
                "written_at = now()",
                (workflow_id, execution, deployment, row.status.value, row.goal,
                 CARDS.dump_json(row.cards).decode(), row.started_at, closed))
            written += 1
        cur = await conn.execute(
            "DELETE FROM plangate.runs_index WHERE deployment = %s AND written_at < %s "
            "AND NOT (workflow_id = ANY(%s))", (deployment, since, ids))
        return written, cur.rowcount
