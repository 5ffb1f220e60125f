"""``windows.record``: an ended run's tool calls' windows, written to the deployment's Postgres
(``world.windows``) for ``plangate report`` to read in one query. A local activity in the run's
last workflow task: nothing of its input is in the history, only its marker.

Which execution and run the row is of, and the deployment it counts for, the worker decides
(the activity's own info, its settings' task queue); the run hands over only what it computed:
its status and its calls' windows.

The row is bookkeeping (issue 47): a Postgres that does not take it neither fails the run nor
holds its end back. The activity tries once; a row it could not write is owed
(``world.owed``), written when Postgres answers again with the time the run ended."""

from __future__ import annotations

import functools
from datetime import UTC, datetime

from temporalio import activity
from temporalio.exceptions import ApplicationError

from plangate.records.interface import WINDOWS_ACTIVITY
from plangate.records.windows import WindowsRow
from plangate.world import owed, windows
from plangate.world.clients import World

TRY_S = 4.0  # the one try in the run's last workflow task (the pool waits 3 s for a connection)


class WindowsActivities:
    def __init__(self, world: World, deployment: str) -> None:
        self.world = world
        self.deployment = deployment

    @activity.defn(name=WINDOWS_ACTIVITY)
    async def record(self, row: WindowsRow) -> None:
        info = activity.info()
        if info.workflow_id is None or info.workflow_run_id is None:
            raise ApplicationError("windows.record runs in a plan run's workflow only",
                                   non_retryable=True)
        execution, workflow_id, ended = info.workflow_run_id, info.workflow_id, datetime.now(UTC)

        # a second end of the same execution (its last workflow task retried): the first row.
        # Written now: Postgres's clock; written late (owed): the worker's at the run's end.
        async def write(late: bool = False) -> None:
            await windows.record(self.world, execution, workflow_id, self.deployment,
                                 row.status, row.calls, closed_at=ended if late else None)

        await owed.written(self.world, f"the windows of {workflow_id}", write, TRY_S,
                           later=functools.partial(write, late=True))
