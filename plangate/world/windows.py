"""Finished runs' windows kept in the deployment's Postgres, ``plangate.windows``: a row per
execution that ended a plan run (the one visibility lists Completed or Failed), written by the
worker as the run ends (``activities.windows``), read by ``plangate report`` in one query
instead of the visibility listing (``client.reporting``).

- ``plangate.windows``: keyed by the execution's run id, so a workflow task retried, replayed or
  reset never writes a second row (``ON CONFLICT DO NOTHING``: the first one stays);
  ``deployment`` is the task queue of the worker's settings (never the run's say);
  ``closed_at`` is Postgres's clock as the row is written, an instant before the execution
  closes (a row owed while Postgres was away: the worker's clock at the run's end);
  ``calls`` the run's ``records.windows.Execution`` list as JSON.
- ``plangate.windows_since``: per deployment, when it wrote its first row (the mark, written
  with that row, never moved after). A run of this code writes its row before its execution
  closes, so only runs closed before the mark (by code that wrote none) lack one: the report
  reads those from visibility, and none is missed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pydantic import TypeAdapter

from plangate.records.report import RunStatus
from plangate.records.windows import Execution
from plangate.world.clients import World

_CALLS: TypeAdapter[list[Execution]] = TypeAdapter(list[Execution])

# the row, and the deployment's mark where it has none yet (the same now(): the first row is
# not before the mark), in one statement
_RECORD = """
WITH marked AS (
    INSERT INTO plangate.windows_since (deployment, since)
    VALUES (%(deployment)s, COALESCE(%(closed_at)s::timestamptz, now()))
    ON CONFLICT (deployment) DO NOTHING
)
INSERT INTO plangate.windows (execution, workflow_id, deployment, status, calls, closed_at)
VALUES (%(execution)s, %(workflow_id)s, %(deployment)s, %(status)s, %(calls)s::jsonb,
        COALESCE(%(closed_at)s::timestamptz, now()))
ON CONFLICT (execution) DO NOTHING
"""
# One query: the mark (no row: the deployment has none) and every row closed after since, from
# the mark on; a mark with no row after it comes back as one row of NULLs. The calls as
# text: pydantic parses them from it at once (json.loads of each jsonb, then validating the
# dicts, took twice as long).
_LISTED = """
SELECT m.since, w.execution, w.workflow_id, w.status, w.calls::text
FROM plangate.windows_since m
LEFT JOIN plangate.windows w
    ON w.deployment = m.deployment AND w.closed_at > %(since)s AND w.closed_at >= m.since
WHERE m.deployment = %(deployment)s
"""


async def record(world: World, execution: str, workflow_id: str, deployment: str,
                 status: RunStatus, calls: list[Execution], closed_at: datetime | None = None
                 ) -> bool:
    """The row of the execution ``execution``; False where it was there already.
    ``closed_at``: when the run ended, for a row written later (None: now)."""
    params = {"execution": execution, "workflow_id": workflow_id, "deployment": deployment,
              "status": status.value, "calls": _CALLS.dump_json(calls).decode(),
              "closed_at": closed_at}
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute(_RECORD, params)
        return bool(cur.rowcount == 1)


@dataclass(frozen=True)
class Row:
    execution: str
    workflow_id: str
    status: RunStatus
    calls: list[Execution]


@dataclass(frozen=True)
class Listed:
    """The rows of the runs closed after ``since``, from ``mark`` on; before it, no row."""

    mark: datetime
    rows: list[Row]


async def listed(world: World, deployment: str, since: datetime) -> Listed | None:
    """The rows of ``deployment`` closed after ``since``, in one query; None where it has
    never written any (no mark)."""
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute(_LISTED, {"since": since, "deployment": deployment})
        got = await cur.fetchall()
    if not got:
        return None
    rows = [Row(execution, workflow_id, RunStatus(status), _CALLS.validate_json(calls))
            for _, execution, workflow_id, status, calls in got if execution is not None]
    return Listed(mark=got[0][0], rows=rows)
