"""The team's workflows, as any Temporal team writes them."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

# the team's activities import boto3 and psycopg: passed through, not loaded in the sandbox
with workflow.unsafe.imports_passed_through():
    from credits.activities import (
        Credit,
        CreditRequest,
        archive_object,
        count_rows,
        issue_credit,
    )


@workflow.defn
class ArchiveWorkflow:
    @workflow.run
    async def run(self, bucket: str, key: str) -> str:
        return await workflow.execute_activity(
            archive_object, args=[bucket, key], start_to_close_timeout=timedelta(seconds=30))


@workflow.defn
class CarefulArchiveWorkflow:
    """Archives when it can; a failed archive, or one a guard refused (an ``ApplicationError``,
    plangate's code its type), is reported, not raised."""

    @workflow.run
    async def run(self, bucket: str, key: str) -> str:
        try:
            return await workflow.execute_activity(
                archive_object, args=[bucket, key], start_to_close_timeout=timedelta(seconds=30))
        except (ActivityError, ApplicationError) as e:
            return f"not archived: {e}"


@workflow.defn
class CreditWorkflow:
    @workflow.run
    async def run(self, req: CreditRequest) -> Credit:
        # a worker that dies mid-call is noticed by its missed heartbeats (plangate's guard
        # sends them while the activity runs), not after the whole timeout
        return await workflow.execute_activity(
            issue_credit, req, start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=5),
            retry_policy=RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=2)))


@workflow.defn
class CountWorkflow:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_activity(
            count_rows, n, start_to_close_timeout=timedelta(seconds=30))
