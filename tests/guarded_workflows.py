"""Workflows of the tests of plangate.temporal that no team would write: they try to get past
the guard."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

# the team's activities import boto3 and psycopg: passed through, not loaded in the sandbox
with workflow.unsafe.imports_passed_through():
    from credits.activities import Credit, CreditRequest, issue_credit


@workflow.defn
class LocalCreditWorkflow:
    """Calls the guarded money activity as a local activity."""

    @workflow.run
    async def run(self, req: CreditRequest) -> Credit:
        return await workflow.execute_local_activity(
            issue_credit, req, start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=1))
