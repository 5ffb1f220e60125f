"""What one MCP client may do with runs: start them (under its own submitter key, limited a
minute, who started them recorded in the run's memo) and read or cancel only its own.

A run id derived from a request identity (``plangate.mcp.guarded``) is answered only when the
run under it is this client's run of this very call (its memo: the client, its submitter and
the plan's digest); anything else under that id is refused and left alone. A run this client
did not start is answered as if there were none (``NotYourRun``), on any queue."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from temporalio.client import WorkflowExecutionDescription
from temporalio.service import RPCError, RPCStatusCode

from plangate.client.api import Plangate
from plangate.client.checked import Checked
from plangate.mcp.clients import MEMO, McpClient, NotYourRun, StartLimit
from plangate.records.placement import of_deployment
from plangate.records.proofs import plan_sha256
from plangate.world.settings import Settings


class CallTaken(NotYourRun):
    """The run id of this call (its request identity) is held by a run that is not this
    client's run of this call."""


class Access:
    """The API, one ``Plangate`` per client (one Temporal connection shared), connected on
    the first call that needs Temporal (``check_plan`` and the catalogue need none)."""

    def __init__(self, settings: Settings, limit: StartLimit) -> None:
        self.settings = settings
        self.limit = limit
        self._base: Plangate | None = None
        self._apis: dict[str, Plangate] = {}
        self._lock = asyncio.Lock()

    async def api(self, who: McpClient) -> Plangate:
        async with self._lock:
            if self._base is None:
                self._base = await Plangate.connect(self.settings)
            api = self._apis.get(who.name)
            if api is None:
                s = self.settings
                own = replace(s, identity=replace(s.identity, submitter_key=who.submitter_key))
                api = self._apis[who.name] = Plangate(self._base.client, own)
            return api

    async def start(
        self, who: McpClient, done: Checked, *, run_id: str | None = None, once: bool = False,
        admitted: bool = False,
    ) -> str:
        """Start a run for ``who`` (``RunsLimited`` past the limit, unless ``admitted``: a read
        the worker sent back to a run was counted when offered). ``once``: the run of this
        call's derived id, started at most once; ``CallTaken`` where that id holds a run
        that is not ``who``'s of this plan. A run id the client chose must be new."""
        if not admitted:
            self.limit.admit(who)
        api = await self.api(who)
        digest = plan_sha256(done.plan)
        handle = await api.submit(done, run_id=run_id, once=once, fresh_id=not once,
                                  memo={MEMO: who.memo(digest)})
        if once:
            memo = await self._memo(api, handle.id)
            if memo != who.memo(digest):
                raise CallTaken(
                    f"the run id of this call ({handle.id}) is held by a run that is not this "
                    f"client's run of this call: nothing was started; call again with another "
                    f"request id"
                )
        return handle.id

    async def mine(self, who: McpClient, run_id: str) -> Plangate:
        """The API to act on ``run_id`` with, where it is ``who``'s run on one of the
        deployment's queues; ``NotYourRun`` otherwise, worded as for no run at all."""
        api = await self.api(who)
        desc = await _described(api, run_id)
        if desc is not None and of_deployment(desc.task_queue, api.settings.temporal.task_queue):
            memo = await desc.memo_value(MEMO, default=None)
            if who.owns(memo):
                return api
        raise NotYourRun(f"no run with id {run_id!r} started by MCP client {who.name}")

    @staticmethod
    async def _memo(api: Plangate, run_id: str) -> Any:
        desc = await _described(api, run_id)
        return None if desc is None else await desc.memo_value(MEMO, default=None)


async def _described(api: Plangate, run_id: str) -> WorkflowExecutionDescription | None:
    try:
        return await api.handle(run_id).describe()
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
