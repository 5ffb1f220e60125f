"""Billing tools on ``demo.invoices``, ``demo.subscriptions`` and ``demo.credits``.

Reads: ``billing.list_invoices`` (an account's invoices and subscriptions, shaped for binds),
``billing.get_invoice``, ``billing.get_subscription``, ``billing.get_credit`` (the readers field
probes use). Writes: ``billing.void_invoice``, ``billing.cancel_subscription``; money:
``billing.issue_credit``. Every write locks, checks and writes in one transaction and is safe to
replay with the same idempotency key.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from psycopg import AsyncCursor, sql
from pydantic import Field, JsonValue, model_validator

from plangate.activities.tools.registry import CallContext, ToolArgs, tool
from plangate.demo._records import (
    IdempotencyKey,
    RecordId,
    Row,
    cents,
    columns,
    derived_id,
    euros,
    fetch_one,
    json_row,
    read_by_key_or_id,
    transaction,
)
from plangate.demo.crm import CUSTOMER_READER
from plangate.plans.catalogue import Contract, Reader, Term, VersionBinding
from plangate.plans.model import Effect
from plangate.plans.scope import Writes
from plangate.world.clients import World
from plangate.world.errors import ToolError

_INVOICE = columns("invoice_id", "account_id", "amount_eur", "status", "version", "voided_by_key")
_SUBSCRIPTION = columns("sub_id", "account_id", "status", "cancel_at", "version")
_CREDIT = columns(
    "credit_id", "account_id", "amount_eur", "applied_to", "idempotency_key", "created_at"
)
_PAYABLE = ("draft", "open")  # invoices that can still be voided (and would still be owed)

INVOICE_READER = Reader("billing.get_invoice", {"invoice_id": "args.invoice_id"})
SUBSCRIPTION_READER = Reader("billing.get_subscription", {"sub_id": "args.sub_id"})
CREDIT_READER = Reader("billing.get_credit", {"idempotency_key": "key"})


class AccountArgs(ToolArgs):
    account_id: RecordId


class InvoiceArgs(ToolArgs):
    invoice_id: RecordId


class VoidArgs(ToolArgs):
    invoice_id: RecordId
    if_version: int | None = Field(default=None, ge=1)  # the version a probe observed


class SubscriptionArgs(ToolArgs):
    sub_id: RecordId


class CancelArgs(ToolArgs):
    sub_id: RecordId
    at: Literal["period_end"] = "period_end"


class CreditArgs(ToolArgs):
    account_id: RecordId
    amount_eur: float = Field(gt=0, le=1_000_000_000)


class GetCreditArgs(ToolArgs):
    idempotency_key: IdempotencyKey | None = None  # of the issue_credit call that made it
    credit_id: RecordId | None = None

    @model_validator(mode="after")
    def _one_key(self) -> GetCreditArgs:
        if (self.idempotency_key is None) == (self.credit_id is None):
            raise ValueError("give exactly one of idempotency_key and credit_id")
        return self


def invoice_json(row: Row) -> dict[str, JsonValue]:
    """invoice_id, account_id, amount_eur, status, version."""
    return json_row(row, drop=("voided_by_key",))


async def _invoice(cur: AsyncCursor[Row], invoice_id: str, lock: bool) -> Row:
    await cur.execute(
        sql.SQL("SELECT {} FROM demo.invoices WHERE invoice_id = %s{}").format(
            _INVOICE, sql.SQL(" FOR UPDATE" if lock else "")
        ),
        (invoice_id,),
    )
    return await fetch_one(cur, f"no invoice {invoice_id}", {"invoice_id": invoice_id})


async def _subscription(cur: AsyncCursor[Row], sub_id: str, lock: bool) -> Row:
    await cur.execute(
        sql.SQL("SELECT {} FROM demo.subscriptions WHERE sub_id = %s{}").format(
            _SUBSCRIPTION, sql.SQL(" FOR UPDATE" if lock else "")
        ),
        (sub_id,),
    )
    return await fetch_one(cur, f"no subscription {sub_id}", {"sub_id": sub_id})


# -- reads ----------------------------------------------------------------------------------------
@tool("billing.list_invoices", AccountArgs, Effect.READ, reader=CUSTOMER_READER)
async def list_invoices(args: AccountArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    """The account's invoices and subscriptions, with the values a close-out plan binds:

    ``invoice_id`` the first draft/open invoice (by id) or null, ``amount_eur`` its amount (0.0
    when there is none), ``open_total_eur`` the sum of every draft/open invoice, ``sub_id`` the
    first active subscription (else the first pending cancellation, else null),
    ``billing_contact``, ``customer_status`` and ``archived`` from the customer record."""
    aid = args.account_id
    async with transaction(world, call, f"list invoices of {aid}") as cur:
        await cur.execute(
            "SELECT status, archived, billing_contact FROM demo.customers WHERE account_id = %s",
            (aid,),
        )
        customer = await fetch_one(cur, f"no customer {aid}", {"account_id": aid})
        await cur.execute(
            sql.SQL(
                "SELECT {} FROM demo.invoices WHERE account_id = %s ORDER BY invoice_id"
            ).format(_INVOICE),
            (aid,),
        )
        invoice_rows = await cur.fetchall()
        await cur.execute(
            sql.SQL(
                "SELECT {} FROM demo.subscriptions WHERE account_id = %s ORDER BY sub_id"
            ).format(_SUBSCRIPTION),
            (aid,),
        )
        subscriptions = [json_row(r) for r in await cur.fetchall()]
    invoices = [invoice_json(r) for r in invoice_rows]
    payable = [r for r in invoice_rows if r["status"] in _PAYABLE]
    first = payable[0] if payable else None
    subs = [s for s in subscriptions if s["status"] == "active"] or [
        s for s in subscriptions if s["status"] == "pending_cancellation"
    ]
    return {
        "account_id": aid,
        "customer_status": customer["status"],
        "archived": customer["archived"],
        "billing_contact": customer["billing_contact"],
        "invoices": list[JsonValue](invoices),
        "invoice_id": first["invoice_id"] if first else None,
        "amount_eur": euros(first["amount_eur"]) if first else 0.0,
        "open_total_eur": euros(sum((r["amount_eur"] for r in payable), Decimal(0))),
        "subscriptions": list[JsonValue](subscriptions),
        "sub_id": subs[0]["sub_id"] if subs else None,
    }


@tool("billing.get_invoice", InvoiceArgs, Effect.READ, reader=INVOICE_READER)
async def get_invoice(args: InvoiceArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    """invoice_id, account_id, amount_eur, status, version."""
    async with transaction(world, call, f"read invoice {args.invoice_id}") as cur:
        return invoice_json(await _invoice(cur, args.invoice_id, lock=False))


@tool("billing.get_subscription", SubscriptionArgs, Effect.READ, reader=SUBSCRIPTION_READER)
async def get_subscription(
    args: SubscriptionArgs, world: World, call: CallContext
) -> dict[str, JsonValue]:
    """sub_id, account_id, status, cancel_at, version."""
    async with transaction(world, call, f"read subscription {args.sub_id}") as cur:
        return json_row(await _subscription(cur, args.sub_id, lock=False))


@tool("billing.get_credit", GetCreditArgs, Effect.READ)
async def get_credit(args: GetCreditArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    """credit_id, account_id, amount_eur, applied_to, idempotency_key, created_at."""
    table = sql.Identifier("demo", "credits")
    row = await read_by_key_or_id(
        world, call, table, _CREDIT, "credit_id", args.idempotency_key, args.credit_id, "credit"
    )
    return json_row(row)


# -- writes ---------------------------------------------------------------------------------------
@tool(
    "billing.void_invoice",
    VoidArgs,
    Effect.WRITE,
    Contract(
        post=(Term("field_equals", {}, {"path": "$.status", "value": "void"}, identifies=True),)
    ),
    reader=INVOICE_READER,
    version=VersionBinding("if_version", Term("field_present", {}, {"path": "$.version"})),
    writes=(Writes("table", name="demo.invoices"),),
)
async def void_invoice(args: VoidArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    """Voids a draft or open invoice and records the key that voided it. The same call again
    (same idempotency key) returns the same result; voiding an invoice some other call voided is
    ``invalid_state`` (400), as the billing system answers it."""
    async with transaction(world, call, f"void invoice {args.invoice_id}") as cur:
        row = await _invoice(cur, args.invoice_id, lock=True)
        if row["status"] == "void":
            if row["voided_by_key"] == call.idempotency_key:
                return invoice_json(row)
            raise ToolError(
                "invalid_state",
                f"invoice {args.invoice_id} is already void",
                {"invoice_id": args.invoice_id, "status": "void"},
            )
        if args.if_version is not None and row["version"] != args.if_version:
            raise ToolError(
                "resource_moved",
                f"invoice {args.invoice_id} is at version {row['version']}, not {args.if_version}",
                {
                    "invoice_id": args.invoice_id,
                    "expected": args.if_version,
                    "current": row["version"],
                },
            )
        await cur.execute(
            sql.SQL(
                "UPDATE demo.invoices SET status = 'void', voided_by_key = %s, "
                "version = version + 1 WHERE invoice_id = %s RETURNING {}"
            ).format(_INVOICE),
            (call.idempotency_key, args.invoice_id),
        )
        return invoice_json(await fetch_one(cur, f"no invoice {args.invoice_id}"))


@tool(
    "billing.cancel_subscription",
    CancelArgs,
    Effect.WRITE,
    Contract(
        post=(
            Term(
                "field_equals",
                {},
                {"path": "$.status", "value": "pending_cancellation"},
                identifies=True,
            ),
        )
    ),
    reader=SUBSCRIPTION_READER,
    writes=(Writes("table", name="demo.subscriptions"),),
)
async def cancel_subscription(
    args: CancelArgs, world: World, call: CallContext
) -> dict[str, JsonValue]:
    """Schedules the cancellation at the end of the period: status ``pending_cancellation``. A
    subscription already pending cancellation is returned as it is; one already cancelled is
    ``invalid_state``."""
    async with transaction(world, call, f"cancel subscription {args.sub_id}") as cur:
        row = await _subscription(cur, args.sub_id, lock=True)
        if row["status"] == "pending_cancellation":
            return json_row(row)
        if row["status"] != "active":
            raise ToolError(
                "invalid_state",
                f"subscription {args.sub_id} is {row['status']}",
                {"sub_id": args.sub_id, "status": row["status"]},
            )
        await cur.execute(
            sql.SQL(
                "UPDATE demo.subscriptions SET status = 'pending_cancellation', cancel_at = %s, "
                "version = version + 1 WHERE sub_id = %s RETURNING {}"
            ).format(_SUBSCRIPTION),
            (args.at, args.sub_id),
        )
        return json_row(await fetch_one(cur, f"no subscription {args.sub_id}"))


@tool(
    "billing.issue_credit",
    CreditArgs,
    Effect.MONEY,
    # Judged on a fresh read of the credit this call made (found by its idempotency key): it
    # exists, and it did not land in suspense, where nobody reconciles it (seed 001).
    Contract(
        post=(
            # read by this call's idempotency key: only this call's credit can make it hold
            Term("field_present", {}, {"path": "$.credit_id"}, identifies=True),
            Term("field_not_equals", {}, {"path": "$.applied_to", "value": "suspense"}),
        )
    ),
    reader=CREDIT_READER,
    writes=(Writes("table", name="demo.credits"),),
    amount="amount_eur",
)
async def issue_credit(args: CreditArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    """Credits the account: ``applied_to`` is ``account`` when the customer record is closed,
    ``suspense`` otherwise (the billing system parks a credit it cannot apply to a closed-out
    account). At most one credit per idempotency key: a replay returns the credit the first call
    made; the same key with other arguments is ``idempotency_conflict``."""
    key = call.idempotency_key
    amount = cents(args.amount_eur)
    by_key = sql.SQL("SELECT {} FROM demo.credits WHERE idempotency_key = %s").format(_CREDIT)

    def replayed(row: Row) -> dict[str, JsonValue]:
        if row["account_id"] != args.account_id or row["amount_eur"] != amount:
            raise ToolError(
                "idempotency_conflict",
                f"key {key} already credited {row['amount_eur']} to {row['account_id']}",
                {"credit_id": row["credit_id"]},
            )
        return json_row(row)

    async with transaction(world, call, f"credit {args.account_id}") as cur:
        await cur.execute(by_key, (key,))
        earlier = await cur.fetchone()
        if earlier is not None:  # this call already made its credit
            return replayed(earlier)
        await cur.execute(
            "SELECT status FROM demo.customers WHERE account_id = %s FOR SHARE",
            (args.account_id,),
        )
        customer = await fetch_one(
            cur, f"no customer {args.account_id}", {"account_id": args.account_id}
        )
        applied_to = "account" if customer["status"] == "closed" else "suspense"
        await cur.execute(
            sql.SQL(
                "INSERT INTO demo.credits (credit_id, account_id, amount_eur, applied_to, "
                "idempotency_key) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (idempotency_key) DO NOTHING RETURNING {}"
            ).format(_CREDIT),
            (derived_id("cr", key), args.account_id, amount, applied_to, key),
        )
        row = await cur.fetchone()
        if row is None:  # a concurrent attempt with this key committed first: its credit
            await cur.execute(by_key, (key,))
            return replayed(await fetch_one(cur, f"no credit for {key}"))
    return json_row(row)
