"""The seeds' incidents as plans, shared by the demo, the tests and the benchmarks."""

from __future__ import annotations

from typing import Any

NEW_CONTACT = "ar@northwind.example"
OLD_CONTACT = "ar@northwind-old.example"


def closeout_plan(account: str = "acct_3319f", replans_max: int = 2) -> dict[str, Any]:
    """Seed 001's six-step close-out of an account whose notice period ended."""
    return {
        "goal": f"close out {account}: void open invoices, close the customer record, cancel at "
        "period end, credit the unused balance, notify the billing contact",
        "budget": {"replans_max": replans_max},
        "steps": [
            {
                "n": 1,
                "tool": "billing.list_invoices",
                "effect": "read",
                "args": {"account_id": account},
                "binds": {
                    "invoice_id": "$.invoice_id",
                    "sub_id": "$.sub_id",
                    "billing_contact": "$.billing_contact",
                    "amount_eur": "$.amount_eur",
                },
            },
            {
                "n": 2,
                "tool": "billing.void_invoice",
                "depends_on": [1],
                "args": {"invoice_id": "${invoice_id}"},
            },
            {
                "n": 3,
                "tool": "customer.update",
                "depends_on": [2],
                "args": {"account_id": account, "status": "closed", "billing_contact": NEW_CONTACT},
            },
            {
                "n": 4,
                "tool": "billing.cancel_subscription",
                "depends_on": [3],
                "args": {"sub_id": "${sub_id}", "at": "period_end"},
            },
            {
                "n": 5,
                "tool": "billing.issue_credit",
                "effect": "money",
                "depends_on": [4],
                "args": {"account_id": account, "amount_eur": "${amount_eur}"},
            },
            {
                "n": 6,
                "tool": "email.send",
                "effect": "external",
                "depends_on": [5],
                "args": {"to": NEW_CONTACT, "template": "account_closed", "account_id": account},
            },
        ],
    }


def seed_replanned_plan(account: str = "acct_3319f") -> dict[str, Any]:
    """The plan seed 001's re-planner answered with: restore first, no void step."""
    return {
        "goal": f"close out {account}",
        "steps": [
            {
                "n": 1,
                "tool": "customer.restore",
                "args": {"account_id": account},
                "post": {"probe": "field_equals", "path": "$.archived", "value": False},
                "on_unmet": "halt",
            },
            {
                "n": 2,
                "tool": "customer.update",
                "depends_on": [1],
                "args": {"account_id": account, "status": "closed", "billing_contact": NEW_CONTACT},
                "post": {"probe": "field_equals", "path": "$.status", "value": "closed"},
            },
            {
                "n": 3,
                "tool": "billing.cancel_subscription",
                "depends_on": [2],
                "args": {"sub_id": "${sub_id}", "at": "period_end"},
                "post": {
                    "probe": "field_equals",
                    "path": "$.status",
                    "value": "pending_cancellation",
                },
            },
            {
                "n": 4,
                "tool": "billing.issue_credit",
                "effect": "money",
                "depends_on": [3],
                "args": {"account_id": account, "amount_eur": "${amount_eur}"},
                "post": {"probe": "field_not_equals", "path": "$.applied_to", "value": "suspense"},
                "on_unmet": "halt",
            },
            {
                "n": 5,
                "tool": "email.send",
                "effect": "external",
                "depends_on": [4],
                "args": {"to": NEW_CONTACT, "template": "account_closed", "account_id": account},
                "post": {"probe": "field_present", "path": "$.message_id"},
                "on_unmet": "retry",
            },
        ],
    }


async def closeout_facts(conn: Any, account: str = "acct_3319f") -> dict[str, Any]:
    """What the close-out left in the world: read straight from the demo tables."""

    async def rows(query: str) -> list[tuple[Any, ...]]:
        cur = await conn.execute(query, (account,))
        return list(await cur.fetchall())

    customer = await rows(
        "SELECT status, archived, billing_contact FROM demo.customers WHERE account_id = %s"
    )
    return {
        "customer": customer[0] if customer else None,
        "invoices": await rows(
            "SELECT invoice_id, status FROM demo.invoices WHERE account_id = %s ORDER BY 1"
        ),
        "subscriptions": await rows(
            "SELECT sub_id, status FROM demo.subscriptions WHERE account_id = %s ORDER BY 1"
        ),
        "credits": await rows(
            "SELECT amount_eur::float, applied_to FROM demo.credits WHERE account_id = %s"
        ),
        "emails": await rows("SELECT to_address, template FROM demo.outbox WHERE account_id = %s"),
    }
