"""Workflows of the tests of plangate.temporal beside the example's: one that tries to get past
the guard (no team would write it), and one that holds the handle of a guarded call."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

# the team's activities import boto3 and psycopg: passed through, not loaded in the sandbox
with workflow.unsafe.imports_passed_through():
    from credits.activities import Credit, CreditRequest, archive_object, issue_credit


@workflow.defn
class LocalCreditWorkflow:
    """Calls the guarded money activity as a local activity."""

    @workflow.run
    async def run(self, req: CreditRequest) -> Credit:
        return await workflow.execute_local_activity(
            issue_credit, req, start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=1))


@workflow.defn
class HandleArchiveWorkflow:
    """Starts the guarded archive and awaits its handle: says whether the handle is the SDK's
    ``ActivityHandle``, and what the archive answered."""

    @workflow.run
    async def run(self, bucket: str, key: str) -> list[str]:
        handle = workflow.start_activity(archive_object, args=[bucket, key],
                                         start_to_close_timeout=timedelta(seconds=30))
        kind = type(handle).__name__
        is_handle = isinstance(handle, workflow.ActivityHandle)
        return [kind, str(is_handle), await handle]
