"""Reads without a run: a call of a tool this deployment's catalogue declares ``read`` is first
offered to the worker as a standalone activity (``plangate.client.reading``), which decides
every guard from its own catalogue and settings and answers a plain successful read itself.
Whatever it does not answer (a tool that is no read on the worker, a refusal, a card, a
condition that does not hold, a failure), and every call when the Temporal server runs no
standalone activities, is answered by the one-step run, as before (docs/mcp.md, "what a read
costs and why").

The front's catalogue only chooses which calls to offer: what the worker's catalogue says
decides. A call of a write, external or money tool is never offered, and the worker refuses
one offered all the same (forged, or a front whose catalogue is not the worker's)."""

from __future__ import annotations

import logging
from datetime import timedelta

from plangate.client.checked import Checked
from plangate.client.reading import NoStandaloneReads, ReadNotAnswered, read_call
from plangate.mcp.front.access import Access
from plangate.mcp.front.clients import McpClient
from plangate.plans.catalogue import ToolInfo
from plangate.plans.model import Effect
from plangate.records.report import RunReport

log = logging.getLogger(__name__)

class FastReads:
    """Offers reads to the worker until the server says it runs no standalone activities
    (then ``off`` says why, and every call is a run)."""

    def __init__(self, access: Access, take_within_s: float) -> None:
        self.access = access
        self.take_within = timedelta(seconds=take_within_s)
        self.off: str | None = None

    def offered(self, info: ToolInfo) -> bool:
        return self.off is None and info.effect is Effect.READ

    async def answer(self, who: McpClient, done: Checked, call_id: str
                     ) -> RunReport | None:
        """The worker's report of the read, or None where a run must answer it (``RunsLimited``
        past the client's limit: a read counts as a run would)."""
        self.access.limit.admit(who)
        api = await self.access.api(who)
        try:
            got = await read_call(api.client, api.settings, done, call_id,
                                  take_within=self.take_within)
        except NoStandaloneReads as e:
            self.off = str(e)
            log.warning("%s; every guarded read is a one-step run", e)
            return None
        except ReadNotAnswered as e:
            log.warning("%s: %s; answered by a run", call_id, e)
            return None
        return got.report  # None: the worker says a run must answer (its log says why)

