"""A run's end kept where ``plangate report`` reads it in one query: its windows (the memo it
upserted, ``showing.Shown.end``) written to the deployment's Postgres by the worker
(``windows.record``, a local activity: its marker is the one event this adds to the history).

The row is bookkeeping: nothing it meets changes how the run ends or what it reports."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError

from plangate.records import options
from plangate.records.interface import WINDOWS_ACTIVITY
from plangate.records.windows import RunWindows, WindowsRow


async def keep(memo: RunWindows, kept: bool) -> None:
    """The row written, before the execution closes. A cancel from Temporal that arrives while
    it is written does not stop it: the run has ended, its status is its own. ``kept``: the
    run's ``KEPT_PATCH`` (``VersionContext.kept``)."""
    row = WindowsRow(status=memo.status, calls=memo.calls)
    writing = asyncio.ensure_future(workflow.execute_local_activity(
        WINDOWS_ACTIVITY, row, start_to_close_timeout=options.WINDOWS_TIMEOUT,
        schedule_to_close_timeout=options.WINDOWS_PATIENCE, retry_policy=options.WINDOWS_RETRY,
    ))  # no summary: the marker alone (a run's steps are what its timeline shows)
    try:
        try:
            await asyncio.shield(writing)
        except asyncio.CancelledError:
            await writing
    except FailureError as e:
        # A local activity's failure arrives unwrapped (an ``ApplicationError``, a timeout):
        # before this patch it failed the run with no report over steps that were done.
        if not isinstance(e, ActivityError) and not kept:
            raise
        why = e.cause if isinstance(e, ActivityError) else e
        workflow.logger.warning("the run's windows were not kept for the report: %s", why)
