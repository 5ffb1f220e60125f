"""A team's refunds marked to run only under plangate's guard (tests of the marker,
test_temporal_marker.py): ``@guarded`` on an async and a sync (thread pool) activity,
``require_guard()`` first in another's body; ``refund_unlisted`` marked and named by no guard
table; ``goodwill`` guarded, unmarked, calling the marked ``refund`` from within."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    import psycopg

    from plangate.temporal import call_key, guarded, require_guard

REFUNDS: Counter[str] = Counter()  # how often a refund's body ran, by account
HELD: dict[str, tuple[asyncio.Event, asyncio.Event]] = {}  # account: (entered, released)
INSERT = ("INSERT INTO team.credits (credit_id, call_key, account_id, amount_cents) "
          "VALUES (%s, %s, %s, %s)")


async def _refund(account_id: str, amount_cents: int) -> str:
    REFUNDS[account_id] += 1
    if account_id in HELD:  # the test holds this call inside its body, admitted
        entered, released = HELD[account_id]
        entered.set()
        await released.wait()
    credit_id = uuid.uuid4().hex
    async with await psycopg.AsyncConnection.connect(os.environ["TEAM_DATABASE_URL"],
                                                    autocommit=True) as conn:
        await conn.execute(INSERT, (credit_id, call_key(), account_id, -amount_cents))
    return credit_id


@activity.defn
@guarded
async def refund(account_id: str, amount_cents: int) -> str:
    return await _refund(account_id, amount_cents)


@activity.defn
@guarded
def refund_sync(account_id: str, amount_cents: int) -> str:
    REFUNDS[account_id] += 1
    credit_id = uuid.uuid4().hex
    with psycopg.connect(os.environ["TEAM_DATABASE_URL"], autocommit=True) as conn:
        conn.execute(INSERT, (credit_id, call_key(), account_id, -amount_cents))
    return credit_id


@activity.defn
async def refund_required(account_id: str, amount_cents: int) -> str:
    require_guard()
    return await _refund(account_id, amount_cents)


@activity.defn
@guarded
async def refund_unlisted(account_id: str, amount_cents: int) -> str:
    return await _refund(account_id, amount_cents)


@activity.defn
async def goodwill(account_id: str, amount_cents: int) -> str:
    return await refund(account_id, amount_cents)


MARKED = [refund, refund_sync, refund_required, refund_unlisted, goodwill]
GUARDS = {"activities": {name: {
    "effect": "money", "amount": "amount_cents", "amount_unit": "cents",
    "params": ["account_id", "amount_cents"],
} for name in ("refund", "refund_sync", "refund_required", "goodwill")}}


@workflow.defn
class RefundWorkflow:
    @workflow.run
    async def run(self, name: str, account_id: str, amount_cents: int) -> str:
        credit_id: str = await workflow.execute_activity(
            name, args=[account_id, amount_cents], result_type=str,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=3,
                                     initial_interval=timedelta(milliseconds=100)))
        return credit_id
