"""A run's row in plangate's runs index (``world.run_index``): its status and the cards it waits
on, handed to the worker (``index.record``, a local activity: one marker in the history) each
time either changes: as it begins, a card published or answered, a re-plan, its end. Nothing
per step.

The row is bookkeeping: a write that fails is logged and the run goes on; the readers find
the run from Temporal where its row is missing or behind, and say so."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio import workflow
from temporalio.exceptions import FailureError

from plangate.records import options, visibility
from plangate.records.interface import INDEX_ACTIVITY
from plangate.records.report import RunReport, RunStatus
from plangate.records.run_index import IndexRow
from plangate.workflows.showing import pending

Said = tuple[RunStatus, tuple[str, ...]]


def said(r: RunReport) -> Said:
    return (r.status, tuple(a.digest for a in pending(r)))


class Index:
    def __init__(self) -> None:
        self.on = False  # the run writes its row (``INDEX_PATCH``, asked as it begins)
        self.written: Said | None = None
        self.closing = False  # the execution hands over or ends: ``keep`` returns

    def behind(self, r: RunReport) -> bool:
        return self.on and said(r) != self.written

    async def write(self, r: RunReport) -> None:
        """The row as ``r`` is now, where it changed since the last write."""
        now = said(r)
        if not self.on or now == self.written:
            return
        self.written = now
        info = workflow.info()
        row = IndexRow(status=r.status, goal=visibility.short_goal(r.goal), cards=pending(r),
                       started_at=info.workflow_start_time,
                       seq=info.get_current_history_length())
        try:
            await workflow.execute_local_activity(
                INDEX_ACTIVITY, row, start_to_close_timeout=options.INDEX_TIMEOUT,
                retry_policy=options.INDEX_RETRY)
        except FailureError as e:
            workflow.logger.warning("the run's row in the runs index was not written: %s", e)

    async def keep(self, report: Callable[[], RunReport]) -> None:
        """Write the row whenever it changes, until the execution hands over or ends
        (``stopped``: a write under way is finished first)."""
        while True:
            await workflow.wait_condition(lambda: self.closing or self.behind(report()))
            if self.closing:
                return
            await self.write(report())

    async def stopped(self, keeping: asyncio.Task[None]) -> None:
        """``keeping`` stopped, a write under way finished (the execution hands over or
        ends)."""
        self.closing = True
        await keeping

    async def last(self, keeping: asyncio.Task[None], r: RunReport) -> None:
        """The run ends: ``keeping`` stopped, then the final row. A cancel from Temporal that
        arrives meanwhile does not stop it (as ``ending.keep``)."""
        writing = asyncio.ensure_future(self._last(keeping, r))
        try:
            await asyncio.shield(writing)
        except asyncio.CancelledError:
            await writing

    async def _last(self, keeping: asyncio.Task[None], r: RunReport) -> None:
        await self.stopped(keeping)
        await self.write(r)
