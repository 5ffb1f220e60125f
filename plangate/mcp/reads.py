"""Reads without a run: a call of a tool this deployment's catalogue declares ``read`` is first
offered to the worker as a standalone activity (``plangate.client.reading``), which decides
every guard from its own catalogue and settings and answers a plain successful read itself.
Whatever it does not answer (a tool that is no read on the worker, a refusal, a card, a
condition that does not hold, a failure), and every call when the Temporal server runs no
standalone activities, is answered by the one-step run, as before (docs/mcp.md, "what a read
costs and why"); so is a read whose activity did not answer within the front's limit, or
answered another call.

The front's catalogue only chooses which calls to offer: what the worker's catalogue says
decides. A call of a write, external or money tool is never offered, and the worker refuses
one offered all the same (forged, or a front whose catalogue is not the worker's)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING

from plangate.client.checked import Checked
from plangate.client.reading import NoStandaloneReads, ReadNotAnswered, read_call, read_id
from plangate.errors import ConfigurationError
from plangate.mcp.access import Access
from plangate.mcp.clients import McpClient
from plangate.plans.catalogue import ToolInfo
from plangate.plans.model import Effect
from plangate.records.report import RunReport

if TYPE_CHECKING:
    from plangate.client.api import Plangate

log = logging.getLogger(__name__)
READS_VAR = "PLANGATE_MCP_READS"
BY_WORKER, BY_RUN = "worker", "run"
# how long the queue a tool's reads go to is taken as known; past it, asked again behind the
# read (a DescribeTaskQueue, off the read's path), and past QUEUE_STALE_S asked before it
QUEUE_FOR_S = 5.0
QUEUE_STALE_S = 60.0


def reads_by_worker(env: Mapping[str, str] | None = None) -> bool:
    """``PLANGATE_MCP_READS``: ``worker`` (the default) offers each read to the worker first;
    ``run`` makes every read a one-step run (a run in ``plangate runs`` and a report for each,
    at a run's cost)."""
    value = (os.environ if env is None else env).get(READS_VAR, "").strip() or BY_WORKER
    if value not in (BY_WORKER, BY_RUN):
        raise ConfigurationError(
            f"{READS_VAR}={value!r}: give {BY_WORKER} (reads answered by the worker without a "
            f"run, the default) or {BY_RUN} (every read a one-step run)")
    return value == BY_WORKER


class FastReads:
    """Offers reads to the worker until the server says it runs no standalone activities
    (then ``off`` says why, and every call is a run)."""

    def __init__(self, access: Access, take_within_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.access = access
        self.take_within = timedelta(seconds=take_within_s)
        self.off: str | None = None
        self._clock = clock
        self._queues: dict[str, tuple[str, float]] = {}  # tool -> (queue, asked at)
        self._asking: dict[str, asyncio.Task[None]] = {}  # tool -> its queue asked again

    async def queue(self, api: Plangate, done: Checked) -> str:
        """Where the read of ``done`` goes (``starting.queue_for``). Once ``QUEUE_FOR_S`` old
        it is asked again behind this read, which goes where it was known to (one
        DescribeTaskQueue less on a read's path); once ``QUEUE_STALE_S`` old, or never asked,
        before it. A worker that left since costs a read its ``take_within`` wait, then a run
        answers it."""
        tool, now = done.plan.steps[0].tool, self._clock()
        known = self._queues.get(tool)
        if known is None or now - known[1] >= QUEUE_STALE_S:
            return await self._ask(api, done, tool)
        if now - known[1] >= QUEUE_FOR_S and tool not in self._asking:
            task = asyncio.create_task(self._ask_behind(api, done, tool))
            self._asking[tool] = task
            task.add_done_callback(lambda _: self._asking.pop(tool, None))
        return known[0]

    async def _ask(self, api: Plangate, done: Checked, tool: str) -> str:
        from plangate.client.starting import queue_for  # with Temporal's client, when used

        asked_at = self._clock()
        queue = await queue_for(api.client, api.settings, done.plan)
        self._queues[tool] = queue, asked_at
        return queue

    async def _ask_behind(self, api: Plangate, done: Checked, tool: str) -> None:
        try:
            await self._ask(api, done, tool)
        except Exception as e:  # the known queue stands; the next read past the bound asks
            log.warning("the queue of %s's reads was not asked again: %s", tool, e)

    def offered(self, info: ToolInfo) -> bool:
        return self.off is None and info.effect is Effect.READ

    async def answer(self, who: McpClient, done: Checked) -> RunReport | None:
        """The worker's report of the read, or None where a run must answer it (``RunsLimited``
        past the client's limit: a read counts as a run would). The read's id is new and
        unguessable (``read_id``), never the run's: no one can start it first."""
        self.access.limit.admit(who)
        api = await self.access.api(who)
        call_id = read_id(done.plan.steps[0].tool)
        try:
            got = await read_call(api.client, api.settings, done, call_id,
                                  take_within=self.take_within,
                                  queue=await self.queue(api, done))
        except NoStandaloneReads as e:
            self.off = str(e)
            log.warning("%s; every guarded read is a one-step run", e)
            return None
        except ReadNotAnswered as e:
            log.warning("%s: %s; answered by a run", call_id, e)
            return None
        return got.report  # None: the worker says a run must answer (its log says why)

