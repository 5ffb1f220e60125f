"""A team whose workflows and activities run on different workers (tests of plangate.temporal
on split workers): a credit of three positional arguments, called by its Temporal name from a
workflow whose worker does not have it."""

from __future__ import annotations

import os
import uuid
from collections import Counter
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError

# the activity writes to the team's Postgres: psycopg passed through, not loaded in the sandbox
with workflow.unsafe.imports_passed_through():
    import psycopg

    from plangate.temporal import call_key

GRANTS: Counter[str] = Counter()  # how often grant_credit's body ran, by account


@activity.defn
async def grant_credit(account_id: str, amount: int, reason: str) -> str:
    """Credit the account ``amount`` whole units; nothing here dedupes."""
    GRANTS[account_id] += 1
    if amount < 0:
        raise ApplicationError("a credit is never negative", type="negative",
                               non_retryable=True)
    credit_id = uuid.uuid4().hex
    async with await psycopg.AsyncConnection.connect(os.environ["TEAM_DATABASE_URL"],
                                                    autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO team.credits (credit_id, call_key, account_id, amount_cents) "
            "VALUES (%s, %s, %s, %s)", (credit_id, call_key(), account_id, amount * 100))
    return credit_id


@workflow.defn
class GrantWorkflow:
    @workflow.run
    async def run(self, account_id: str, amount: int, reason: str) -> str:
        credit_id: str = await workflow.execute_activity(
            "grant_credit", args=[account_id, amount, reason], result_type=str,
            start_to_close_timeout=timedelta(seconds=30))
        return credit_id
