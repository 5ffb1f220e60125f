"""``index.record``: a run's row in the open-runs index (``world.run_index``), written each time
its status or its pending cards change. A local activity in the workflow task of the change:
nothing of its input is in the history, only its marker.

Which run and execution the row is of, and the deployment it counts for, the worker decides
(the activity's own info, its settings' task queue); the run hands over only what it computed:
its status, goal, pending cards and its own order (``records.run_index``).

The row is bookkeeping: a Postgres that does not take it neither fails the run nor holds it
back. The activity tries once; a row it could not write is owed (``world.owed``), written when
Postgres answers again, unless the run wrote a newer one meanwhile (its order says)."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from plangate.records.interface import INDEX_ACTIVITY
from plangate.records.run_index import IndexRow
from plangate.world import owed, run_index
from plangate.world.clients import World

TRY_S = 4.0  # the one try in the run's workflow task (the pool waits 3 s for a connection)


class IndexActivities:
    def __init__(self, world: World, deployment: str) -> None:
        self.world = world
        self.deployment = deployment

    @activity.defn(name=INDEX_ACTIVITY)
    async def record(self, row: IndexRow) -> None:
        info = activity.info()
        if info.workflow_id is None or info.workflow_run_id is None:
            raise ApplicationError("index.record runs in a plan run's workflow only",
                                   non_retryable=True)
        workflow_id, execution = info.workflow_id, info.workflow_run_id

        async def write() -> None:
            await run_index.record(self.world, workflow_id, execution, self.deployment, row)

        await owed.written(self.world, f"the index row of {workflow_id}", write, TRY_S)
