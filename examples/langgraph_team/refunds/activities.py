"""The team's activities: a refund of an order (money) and its reader by the call's key.

Nothing here dedupes: two calls make two refunds. plangate's guard, on the worker that runs
``issue_refund``, makes the second call under one key answer from its effect ledger instead."""

from __future__ import annotations

import os
import uuid

import psycopg
from pydantic import BaseModel, Field
from temporalio import activity

from plangate.temporal import call_key

#: The team's own Postgres, read from the environment (under ``plangate dev``, the stack's:
#: ``$PLANGATE_DATABASE_URL``).
WORLD_VAR = "TEAM_DATABASE_URL"


class RefundRequest(BaseModel):
    """Refund part or all of a customer's order, in cents."""

    order_id: str = Field(description="the order to refund, as the customer gave it")
    amount_cents: int = Field(description="the amount to refund, in cents")
    reason: str = Field(default="", description="why, in the customer's words")


class Refund(BaseModel):
    refund_id: str
    order_id: str
    amount_cents: int


async def ensure_schema() -> None:
    async with await psycopg.AsyncConnection.connect(os.environ[WORLD_VAR],
                                                     autocommit=True) as conn:
        await conn.execute("CREATE SCHEMA IF NOT EXISTS team")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS team.refunds (refund_id text PRIMARY KEY, "
            "call_key text, order_id text NOT NULL, amount_cents bigint NOT NULL)")


@activity.defn
async def issue_refund(req: RefundRequest) -> Refund:
    """Refund the order, recording the guard's key beside it for ``find_refund``."""
    refund = Refund(refund_id=uuid.uuid4().hex, order_id=req.order_id,
                    amount_cents=req.amount_cents)
    async with await psycopg.AsyncConnection.connect(os.environ[WORLD_VAR],
                                                     autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO team.refunds (refund_id, call_key, order_id, amount_cents) "
            "VALUES (%s, %s, %s, %s)",
            (refund.refund_id, call_key(), refund.order_id, refund.amount_cents))
    return refund


@activity.defn
async def find_refund(key: str) -> Refund | None:
    """The refund a call made, by the call's key (None: there is none)."""
    async with await psycopg.AsyncConnection.connect(os.environ[WORLD_VAR],
                                                     autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT refund_id, order_id, amount_cents FROM team.refunds WHERE call_key = %s",
            (key,))
        row = await cur.fetchone()
    return None if row is None else Refund(refund_id=row[0], order_id=row[1],
                                           amount_cents=row[2])
