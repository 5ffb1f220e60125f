"""``PlangatePlugin``: plangate's guard on a team's own Temporal client and worker, as
Temporal's and pydantic-ai's integrations are added (``plugins=[...]``).

It adds, and replaces nothing: a worker interceptor (the workflow side wraps each guarded
activity call; the activity side decides each again at the call), plangate's local activities
(``plangate.guard.*``), plangate's modules to the passthrough modules of the team's own
workflow runner (its class and every other restriction kept, as Temporal's own plugins do),
``GuardHalted`` to the worker's workflow failure exception types, and while the worker runs,
plangate's world (its Postgres, with the effect ledger's tables made, and S3). Temporal is
reached through the worker's own client alone. The team's data converter, interceptors and
workflows are the team's: nothing of plangate's is sent in a payload of theirs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHistory
from temporalio.plugin import SimplePlugin
from temporalio.worker import (
    ActivityInboundInterceptor,
    Interceptor,
    Replayer,
    WorkerConfig,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowReplayResult,
)

from plangate.activities.bootstrap import ensure_schema
from plangate.client.listings import registered
from plangate.temporal.at_call import GuardAtCall
from plangate.temporal.errors import GuardHalted
from plangate.temporal.guards import GuardActivities, Guarded, activity_name
from plangate.temporal.table import GuardTable
from plangate.temporal.workflow_guard import Guarding, workflow_interceptor
from plangate.worker.sandbox import passthrough_only
from plangate.workflows.sealing import SealKey
from plangate.world.clients import World
from plangate.world.keys import seal_key
from plangate.world.settings import Settings

log = logging.getLogger(__name__)


class GuardInterceptor(Interceptor):
    """``workflows=False``: the activity side alone."""

    def __init__(self, guarded: Guarded, key: SealKey, *, workflows: bool = True) -> None:
        self.guarded, self.key, self.workflows = guarded, key, workflows
        self._workflow: type[WorkflowInboundInterceptor] | None = None

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return GuardAtCall(next, self.guarded, self.key)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        if not self.workflows:
            return None
        if self._workflow is None:
            asks = self.guarded.settings.policy.approve_effects
            self._workflow = workflow_interceptor({
                n: Guarding(g.effect, g.approval or g.effect in asks)
                for n, g in self.guarded.table.activities.items()},
                self.guarded.settings.temporal.task_queue, self.key)
        return self._workflow


class PlangatePlugin(SimplePlugin):
    """``table``: the guard table (a ``GuardTable``, a mapping, or a YAML/JSON file's path).
    ``settings``: the deployment's (default: read from the environment, as ``plangate worker``
    reads them). ``principal``: the name this worker's calls act as, which the deployment's
    policies decide on. ``workflow_guard=False``: the activity side alone (every guarded
    activity refused unless a guarded workflow of another worker scheduled it)."""

    def __init__(
        self,
        table: GuardTable | str | Path | dict[str, Any],
        *,
        settings: Settings | None = None,
        principal: str | None = None,
        workflow_guard: bool = True,
    ) -> None:
        self.table = table if isinstance(table, GuardTable) else GuardTable.load(table)
        self.settings = settings or Settings.from_env(os.environ)
        self.guarded = Guarded(self.table, self.settings, principal)
        self.workflow_guard = workflow_guard
        self.checks = GuardActivities(self.guarded)
        # the deployment's call seal key, read from its Postgres when the worker runs
        self.key = SealKey()
        self.client: Client | None = None  # the worker's own, given in its config
        super().__init__(
            "plangate.PlangatePlugin",
            interceptors=[GuardInterceptor(self.guarded, self.key, workflows=workflow_guard)],
            activities=[self.checks.check, self.checks.read, self.checks.approvers],
            workflow_runner=passthrough_only,
            # an ApplicationError fails the workflow already; listed as Temporal's plugins list
            # theirs, so the worker's config names what fails a team's workflow
            workflow_failure_exception_types=[GuardHalted],
            run_context=self._running,
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        self.client = config.get("client")
        acts: Sequence[Callable[..., Any]] = config.get("activities") or ()
        named = {n: fn for fn in acts if (n := activity_name(fn)) is not None}
        # the workflows' guard is this worker's: their cards are made and read here
        runs = bool(config.get("workflows")) and self.workflow_guard
        self.guarded.bind(named, runs_workflows=runs)
        if config.get("workflows") and not acts and not self._later(config):
            # plangate's activities are local only: a worker of workflows alone polls no
            # activity task, as it would without the plugin (on a shared task queue it would
            # be handed the team's activities, which it does not have). Not where a plugin
            # configured after this one may add activities of its own.
            config["no_remote_activities"] = True
        missing = sorted(set(self.table.activities) - set(named))
        if missing:
            log.warning("the guard table names activities this worker does not have: %s "
                        "(guarded where another worker runs them)", ", ".join(missing))
        return super().configure_worker(config)

    def _later(self, config: WorkerConfig) -> bool:
        """Whether a plugin of the worker's is configured after this one (this one given to
        the client: any of the worker's)."""
        mine = list(config.get("plugins") or ())
        after = mine[mine.index(self) + 1:] if self in mine else mine
        return bool(after)

    @asynccontextmanager
    async def run_replayer(
        self, replayer: Replayer, histories: AsyncIterator[WorkflowHistory],
        next: Callable[[Replayer, AsyncIterator[WorkflowHistory]],
                       AbstractAsyncContextManager[AsyncIterator[WorkflowReplayResult]]],
    ) -> AsyncIterator[AsyncIterator[WorkflowReplayResult]]:
        """A replay reads nothing of the world (the local activities' answers are in the
        history): no connection is opened for it."""
        async with next(replayer, histories) as results:
            yield results

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        world = World(self.settings.world)
        try:
            await ensure_schema(world, self.settings.catalogue)
            self.key.value = await seal_key(world)
            self.guarded.open(world)
            # asked of the worker's own client (a server that cannot say: not registered, and
            # the guarded runs are not listed by ``plangate runs``; the guard holds without it)
            self.guarded.visible = self.client is not None and await registered(self.client)
            yield
        finally:
            await world.close()
