"""An extension for the effect ledger's tests (``PLANGATE_EXTENSIONS=tests.ledger_tools``): money
tools that do NOT dedupe by key, as an extension tool or a vendor's API may not.

- ``pay.blind(account, amount_eur, hold_s?)``: money, no reader. Every call inserts a payment
  row, whatever its key (the row carries the key only so a test can see who paid);
- ``pay.keyed(account, amount_eur, hold_s?)``: the same, with a reader by key (``pay.find``);
- ``pay.find(key)``: read, the payment made under a key.

The payment commits in its own connection (not ``world.pg.tool_transaction``): the effect is
in the world before the tool returns, and the ledger's outcome comes after it. ``hold_s``:
after paying, the tool holds that long before it answers (a test kills its worker there).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from pydantic import Field, JsonValue

from plangate import CallContext, Contract, Effect, Reader, Registry, ToolArgs, World, tool
from plangate.probes.registry import NoRecord

SCHEMA = """
CREATE SCHEMA IF NOT EXISTS ledger_test;
CREATE TABLE IF NOT EXISTS ledger_test.payments (
    id bigserial PRIMARY KEY,
    account text NOT NULL,
    amount_eur numeric NOT NULL,
    idempotency_key text NOT NULL,
    paid_at timestamptz NOT NULL DEFAULT now()
);
"""

KEYED = Reader("pay.find", {"key": "key"})


class PayArgs(ToolArgs):
    account: Annotated[str, Field(pattern=r"^[a-z0-9_]{1,40}$")]
    amount_eur: Annotated[float, Field(gt=0, le=10_000)]
    hold_s: Annotated[float, Field(ge=0, le=600)] = 0.0


class FindArgs(ToolArgs):
    key: str


async def _pay(args: PayArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute(
            "INSERT INTO ledger_test.payments (account, amount_eur, idempotency_key) "
            "VALUES (%s, %s, %s) RETURNING id",
            (args.account, args.amount_eur, call.idempotency_key),
        )
        row = await cur.fetchone()
    if args.hold_s:
        await asyncio.sleep(args.hold_s)
    return {"payment_id": row[0] if row else None, "account": args.account}


@tool("pay.blind", PayArgs, Effect.MONEY, amount="amount_eur")
async def pay_blind(args: PayArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    """Pays, with nothing that can say afterwards whether it did."""
    return await _pay(args, world, call)


@tool("pay.keyed", PayArgs, Effect.MONEY, reader=KEYED, amount="amount_eur",
      contract=Contract())
async def pay_keyed(args: PayArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    """Pays; ``pay.find`` reads the payment back by the call's key."""
    return await _pay(args, world, call)


@tool("pay.find", FindArgs, Effect.READ)
async def pay_find(args: FindArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, account FROM ledger_test.payments WHERE idempotency_key = %s "
            "ORDER BY id LIMIT 1", (args.key,),
        )
        row = await cur.fetchone()
    if row is None:
        raise NoRecord(f"no payment under {args.key}")
    return {"payment_id": row[0], "account": row[1]}


async def _schema(world: World) -> None:
    pool = await world.pool()
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('ledger_test.schema'))")
        await conn.execute(SCHEMA)


def register(registry: Registry) -> None:
    import sys

    registry.add_tools(sys.modules[__name__])
    registry.add_schema("ledger_test", _schema)
