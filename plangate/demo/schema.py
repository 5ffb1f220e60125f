"""The demo systems of the churn close-out (seed 001) on real Postgres, in schema ``demo``.

Billing (invoices, subscriptions, credits), the CRM's customer records and an e-mail outbox.
The tools in ``plangate.demo.billing``, ``.crm`` and ``.email`` act on these tables;
``seed_acct_3319f`` (re)creates the world the incident ran against; the schema comes with the
closed customer ``examples/credit.json`` credits (``EXAMPLE_ACCOUNT``).

Columns beyond the obvious ones carry the idempotency of writes: ``customers.last_write_key``
(the key of the write that produced the current record), ``invoices.voided_by_key``, and the
unique ``idempotency_key`` of credits and outbox messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from plangate.world.clients import World

DEMO_SCHEMA = """
CREATE SCHEMA IF NOT EXISTS demo;

CREATE TABLE IF NOT EXISTS demo.customers (
    account_id text PRIMARY KEY,
    status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'closed')),
    archived boolean NOT NULL DEFAULT false,
    archived_at timestamptz NULL,
    billing_contact text NOT NULL,
    version int NOT NULL DEFAULT 1,
    last_write_key text NULL
);

CREATE TABLE IF NOT EXISTS demo.invoices (
    invoice_id text PRIMARY KEY,
    account_id text NOT NULL REFERENCES demo.customers (account_id) ON DELETE CASCADE,
    amount_eur numeric(12, 2) NOT NULL,
    status text NOT NULL CHECK (status IN ('draft', 'open', 'void')),
    version int NOT NULL DEFAULT 1,
    voided_by_key text NULL
);

CREATE TABLE IF NOT EXISTS demo.subscriptions (
    sub_id text PRIMARY KEY,
    account_id text NOT NULL REFERENCES demo.customers (account_id) ON DELETE CASCADE,
    status text NOT NULL
        CHECK (status IN ('active', 'pending_cancellation', 'cancelled')),
    cancel_at text NULL,
    version int NOT NULL DEFAULT 1
);

CREATE TABLE IF NOT EXISTS demo.credits (
    credit_id text PRIMARY KEY,
    account_id text NOT NULL REFERENCES demo.customers (account_id) ON DELETE CASCADE,
    amount_eur numeric(12, 2) NOT NULL,
    applied_to text NOT NULL CHECK (applied_to IN ('suspense', 'account')),
    idempotency_key text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS demo.outbox (
    message_id text PRIMARY KEY,
    to_address text NOT NULL,
    template text NOT NULL,
    account_id text NULL,
    idempotency_key text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS invoices_account ON demo.invoices (account_id);
CREATE INDEX IF NOT EXISTS subscriptions_account ON demo.subscriptions (account_id);
CREATE INDEX IF NOT EXISTS credits_account ON demo.credits (account_id);
"""

# Two workers bootstrapping at once must not race on CREATE SCHEMA / CREATE TABLE.
_LOCK = "SELECT pg_advisory_xact_lock(hashtext('plangate.demo_schema'))"


#: The customer of ``examples/credit.json``: closed, so a credit applies to its account (a
#: credit to an active one is parked in suspense, and its post check fails).
EXAMPLE_ACCOUNT = "acct_7a01c"


async def ensure_demo_schema(world: World) -> None:
    pool = await world.pool()
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK)
        await conn.execute(DEMO_SCHEMA)
        # seeded once, so the example runs as written on a fresh stack; never reset. Read
        # first: a worker whose role may not insert there meets the row `plangate setup` made
        cur = await conn.execute(
            "SELECT 1 FROM demo.customers WHERE account_id = %s", (EXAMPLE_ACCOUNT,)
        )
        if await cur.fetchone() is None:
            await conn.execute(
                "INSERT INTO demo.customers (account_id, status, billing_contact) "
                "VALUES (%s, 'closed', %s) ON CONFLICT (account_id) DO NOTHING",
                (EXAMPLE_ACCOUNT, "ar@contoso.example"),
            )


@dataclass(frozen=True)
class Account:
    """One account of the demo world, as ``seed_account`` writes it."""

    account_id: str
    billing_contact: str
    status: str = "active"
    archived_at: datetime | None = None
    invoices: tuple[tuple[str, Decimal, str], ...] = ()  # (invoice_id, amount_eur, status)
    subscriptions: tuple[tuple[str, str], ...] = ()  # (sub_id, status)


ACCT_3319F = Account(
    account_id="acct_3319f",
    billing_contact="ar@northwind-old.example",
    status="active",
    # the data-retention job ran at 02:14 and archived the record (inactive > 400 days)
    archived_at=datetime(2026, 3, 12, 2, 14, 7, tzinfo=UTC),
    invoices=(("in_88a2", Decimal("612.40"), "draft"),),
    subscriptions=(("sub_71c2", "active"),),
)


async def seed_account(world: World, account: Account) -> None:
    """(Re)creates one account exactly as given: its earlier rows, credits and outbox messages
    included, are deleted first, in one transaction."""
    pool = await world.pool()
    async with pool.connection() as conn, conn.transaction():
        aid = account.account_id
        await conn.execute("DELETE FROM demo.outbox WHERE account_id = %s", (aid,))
        # the cascade removes its invoices, subscriptions and credits
        await conn.execute("DELETE FROM demo.customers WHERE account_id = %s", (aid,))
        await conn.execute(
            "INSERT INTO demo.customers (account_id, status, archived, archived_at, "
            "billing_contact) VALUES (%s, %s, %s, %s, %s)",
            (aid, account.status, account.archived_at is not None, account.archived_at,
             account.billing_contact),
        )
        for invoice_id, amount, status in account.invoices:
            await conn.execute(
                "DELETE FROM demo.invoices WHERE invoice_id = %s", (invoice_id,)
            )
            await conn.execute(
                "INSERT INTO demo.invoices (invoice_id, account_id, amount_eur, status) "
                "VALUES (%s, %s, %s, %s)",
                (invoice_id, aid, amount, status),
            )
        for sub_id, status in account.subscriptions:
            await conn.execute("DELETE FROM demo.subscriptions WHERE sub_id = %s", (sub_id,))
            await conn.execute(
                "INSERT INTO demo.subscriptions (sub_id, account_id, status) VALUES (%s, %s, %s)",
                (sub_id, aid, status),
            )


async def seed_acct_3319f(world: World) -> None:
    """The world of seed 001 at 07:31:08 on 12 March: customer acct_3319f archived at
    2026-03-12T02:14:07Z (status still active, billing contact ar@northwind-old.example), one
    draft invoice in_88a2 of EUR 612.40, one active subscription sub_71c2; no credits, no mail."""
    await ensure_demo_schema(world)
    await seed_account(world, ACCT_3319F)
