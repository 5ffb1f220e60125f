"""What a plan run hands the worker for its row in the open-runs index (``index.record``, a
local activity; ``world.run_index``): its status and the cards it waits on, each time either
changes. Which run, execution and deployment the row is of the worker decides (the activity's
own info, its settings); the run's own order (``started_at``, ``seq``) keeps a write that comes
late (owed while Postgres was away) from overwriting a newer one."""

from __future__ import annotations

from datetime import datetime

from plangate.plans._base import Model
from plangate.records.approvals import ApprovalRecord
from plangate.records.report import RunStatus


class IndexRow(Model):
    status: RunStatus
    goal: str  # as visibility shows it (``visibility.short_goal``)
    cards: list[ApprovalRecord]  # pending, of the plan version in force
    started_at: datetime  # the execution's start, as visibility lists it (StartTime)
    seq: int  # the execution's history length at the write: a later write has a larger one
