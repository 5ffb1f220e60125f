"""``windows.record``: an ended run's tool calls' windows, written to the deployment's Postgres
(``world.windows``) for ``plangate report`` to read in one query. A local activity in the run's
last workflow task: nothing of its input is in the history, only its marker.

Which execution and run the row is of, and the deployment it counts for, the worker decides
(the activity's own info, its settings' task queue); the run hands over only what it computed:
its status and its calls' windows."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from plangate.records.interface import WINDOWS_ACTIVITY
from plangate.records.windows import WindowsRow
from plangate.world import windows
from plangate.world.clients import World


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
        # a second end of the same execution (its last workflow task retried): the first row
        await windows.record(self.world, info.workflow_run_id, info.workflow_id,
                             self.deployment, row.status, row.calls)
