"""The churn close-out's demo systems (seed 001) as tools with contracts, on the real Postgres.

Each test builds its own account (unique ids) unless it is about the seed itself, so tests do
not depend on one another's rows.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from pydantic import JsonValue, ValidationError

from plangate.activities.probe_activity import probe_context
from plangate.activities.tools import TOOLS, CallContext
from plangate.demo.schema import Account, seed_account, seed_acct_3319f
from plangate.probes import PROBES, Verdict
from plangate.records.calls import ProbeRequest, StepRef
from plangate.testing import running_worker, scheduled
from plangate.world.clients import World
from plangate.world.errors import ToolError

ARCHIVED_AT = datetime(2026, 3, 12, 2, 14, 7, tzinfo=UTC)


async def call(world: World, tool: str, args: dict[str, Any], key: str) -> dict[str, JsonValue]:
    spec = TOOLS[tool]
    return await spec.fn(spec.args.model_validate(args), world, CallContext("test", 1, key))


async def failing(world: World, tool: str, args: dict[str, Any], key: str) -> ToolError:
    with pytest.raises(ToolError) as e:
        await call(world, tool, args, key)
    return e.value


async def probe(
    world: World, name: str, tool: str, args: dict[str, Any], key: str = "",
    output: dict[str, JsonValue] | None = None, **probe_args: JsonValue,
) -> Verdict:
    spec = PROBES[name]
    ref = StepRef(run_id="test", plan_version=1, n=1, tool=tool, args=args)
    ctx = probe_context(
        ProbeRequest(step=ref, conditions=[], idempotency_key=key, output=output), world, TOOLS
    )
    return await spec.fn(spec.args.model_validate(probe_args), world, ctx)


def key() -> str:
    return f"test-{uuid.uuid4().hex[:8]}/v1/1"


async def new_account(world: World, *, archived: bool = False, status: str = "active") -> Account:
    s = uuid.uuid4().hex[:8]
    acct = Account(
        account_id=f"acct_{s}",
        billing_contact=f"ar@{s}-old.example",
        status=status,
        archived_at=ARCHIVED_AT if archived else None,
        invoices=((f"in_{s}", Decimal("612.40"), "draft"),),
        subscriptions=((f"sub_{s}", "active"),),
    )
    await seed_account(world, acct)
    return acct


async def row(pg: Any, query: str, *params: Any) -> tuple[Any, ...]:
    cur = await pg.execute(query, params)
    found = await cur.fetchone()
    assert found is not None
    return tuple(found)


async def count(pg: Any, query: str, *params: Any) -> int:
    return int((await row(pg, query, *params))[0])


# -- the seed ---------------------------------------------------------------------------------
async def test_seed_recreates_the_incident_world(world, pg):
    await seed_acct_3319f(world)
    await call(world, "customer.restore", {"account_id": "acct_3319f"}, key())  # the world moves
    await seed_acct_3319f(world)  # ... and is put back exactly
    customer = await call(world, "customer.get", {"account_id": "acct_3319f"}, key())
    assert customer == {
        "account_id": "acct_3319f", "status": "active", "archived": True,
        "archived_at": "2026-03-12T02:14:07Z", "billing_contact": "ar@northwind-old.example",
        "version": 1,
    }
    listed = await call(world, "billing.list_invoices", {"account_id": "acct_3319f"}, key())
    assert (listed["invoice_id"], listed["amount_eur"], listed["sub_id"],
            listed["billing_contact"]) == ("in_88a2", 612.40, "sub_71c2",
                                           "ar@northwind-old.example")
    assert listed["invoices"] == [{"invoice_id": "in_88a2", "account_id": "acct_3319f",
                                   "amount_eur": 612.40, "status": "draft", "version": 1}]
    assert await count(pg, "SELECT count(*) FROM demo.credits WHERE account_id = %s",
                       "acct_3319f") == 0


# -- customer ---------------------------------------------------------------------------------
async def test_update_of_an_archived_record_is_refused(world, pg):
    acct = await new_account(world, archived=True)
    args = {"account_id": acct.account_id, "status": "closed",
            "billing_contact": "ar@northwind.example"}
    err = await failing(world, "customer.update", args, key())
    assert (err.code, err.status, err.retryable) == ("record_archived", 409, False)
    assert err.data == {"account_id": acct.account_id, "archived_at": "2026-03-12T02:14:07Z"}
    assert await row(pg, "SELECT status, billing_contact, version FROM demo.customers "
                         "WHERE account_id = %s", acct.account_id) == (
        "active", acct.billing_contact, 1)


async def test_restore_then_update_bumps_the_version(world, pg):
    acct = await new_account(world, archived=True)
    aid = acct.account_id
    restored = await call(world, "customer.restore", {"account_id": aid}, key())
    assert (restored["archived"], restored["archived_at"], restored["version"]) == (False, None, 2)
    again = await call(world, "customer.restore", {"account_id": aid}, key())
    assert again == restored  # not archived: nothing to do, no new version

    k = key()
    args = {"account_id": aid, "status": "closed", "billing_contact": "ar@northwind.example",
            "if_version": 2}
    updated = await call(world, "customer.update", args, k)
    assert (updated["status"], updated["billing_contact"], updated["version"]) == (
        "closed", "ar@northwind.example", 3)
    # a replay of the same call (same key) finds its own write: no second bump, no 409
    assert await call(world, "customer.update", args, k) == updated
    assert await row(pg, "SELECT status, billing_contact, archived, version FROM demo.customers "
                         "WHERE account_id = %s", aid) == (
        "closed", "ar@northwind.example", False, 3)
    # another call that assumed version 2 finds the record moved
    err = await failing(world, "customer.update", {**args, "status": "active"}, key())
    assert (err.code, err.status) == ("resource_moved", 409)
    assert err.data == {"account_id": aid, "expected": 2, "current": 3}


async def test_missing_customer_is_not_found(world):
    err = await failing(world, "customer.get", {"account_id": "acct_nobody"}, key())
    assert (err.code, err.status) == ("not_found", 404)
    err = await failing(world, "billing.list_invoices", {"account_id": "acct_nobody"}, key())
    assert err.code == "not_found"


# -- invoices and subscriptions -----------------------------------------------------------------
async def test_void_twice_with_the_same_key_voids_once(world, pg):
    acct = await new_account(world)
    invoice_id = acct.invoices[0][0]
    k = key()
    first = await call(world, "billing.void_invoice", {"invoice_id": invoice_id}, k)
    assert (first["status"], first["version"]) == ("void", 2)
    assert await call(world, "billing.void_invoice", {"invoice_id": invoice_id}, k) == first
    assert await row(pg, "SELECT status, version, voided_by_key FROM demo.invoices "
                         "WHERE invoice_id = %s", invoice_id) == ("void", 2, k)


async def test_void_of_an_invoice_another_call_voided_is_invalid_state(world, pg):
    acct = await new_account(world)
    invoice_id = acct.invoices[0][0]
    await call(world, "billing.void_invoice", {"invoice_id": invoice_id}, key())
    err = await failing(world, "billing.void_invoice", {"invoice_id": invoice_id}, key())
    assert (err.code, err.status, err.retryable) == ("invalid_state", 400, False)
    listed = await call(world, "billing.list_invoices", {"account_id": acct.account_id}, key())
    assert (listed["invoice_id"], listed["amount_eur"]) == (None, 0.0)


async def test_cancel_subscription_at_period_end(world, pg):
    acct = await new_account(world)
    sub_id = acct.subscriptions[0][0]
    out = await call(world, "billing.cancel_subscription", {"sub_id": sub_id}, key())
    assert (out["status"], out["cancel_at"]) == ("pending_cancellation", "period_end")
    assert await call(world, "billing.cancel_subscription", {"sub_id": sub_id}, key()) == out
    assert await row(pg, "SELECT status FROM demo.subscriptions WHERE sub_id = %s", sub_id) == (
        "pending_cancellation",)


# -- credits ----------------------------------------------------------------------------------
async def test_credit_dedupes_on_the_idempotency_key(world, pg):
    acct = await new_account(world, status="closed")
    args = {"account_id": acct.account_id, "amount_eur": 612.40}
    k = key()
    first = await call(world, "billing.issue_credit", args, k)
    assert await call(world, "billing.issue_credit", args, k) == first
    assert await count(pg, "SELECT count(*) FROM demo.credits WHERE account_id = %s",
                       acct.account_id) == 1
    assert first["amount_eur"] == 612.40
    err = await failing(world, "billing.issue_credit", {**args, "amount_eur": 1.0}, k)
    assert (err.code, err.retryable) == ("idempotency_conflict", False)
    assert await count(pg, "SELECT count(*) FROM demo.credits WHERE account_id = %s",
                       acct.account_id) == 1


async def test_credit_lands_in_suspense_unless_the_account_is_closed(world, pg):
    acct = await new_account(world, archived=True)  # never closed, as in the incident
    args = {"account_id": acct.account_id, "amount_eur": 612.40}
    parked = await call(world, "billing.issue_credit", args, key())
    assert parked["applied_to"] == "suspense"

    await call(world, "customer.restore", {"account_id": acct.account_id}, key())
    await call(world, "customer.update", {"account_id": acct.account_id, "status": "closed"},
               key())
    applied = await call(world, "billing.issue_credit", args, key())
    assert applied["applied_to"] == "account"
    assert await row(pg, "SELECT applied_to FROM demo.credits WHERE credit_id = %s",
                     applied["credit_id"]) == ("account",)


# -- e-mail -----------------------------------------------------------------------------------
async def test_email_dedupes_on_the_idempotency_key(world, pg):
    acct = await new_account(world)
    args = {"to": "ar@northwind.example", "template": "account_closed",
            "account_id": acct.account_id}
    k = key()
    sent = await call(world, "email.send", args, k)
    assert str(sent["message_id"]).startswith("m_")
    assert await call(world, "email.send", args, k) == sent
    assert await count(pg, "SELECT count(*) FROM demo.outbox WHERE idempotency_key = %s", k) == 1
    err = await failing(world, "email.send", {**args, "to": "someone@else.example"}, k)
    assert err.code == "idempotency_conflict"


# -- field probes read the real rows ----------------------------------------------------------
async def test_field_probes_reread_the_record(world, pg):
    acct = await new_account(world, archived=True)
    aid = acct.account_id
    cust = {"account_id": aid}

    v = await probe(world, "field_equals", "customer.restore", cust,
                    path="$.archived", value=False)
    assert (v.holds, v.observed) == (False, True)
    await call(world, "customer.restore", cust, key())
    v = await probe(world, "field_equals", "customer.restore", cust,
                    path="$.archived", value=False)
    assert v.holds

    update = {"account_id": aid, "status": "closed"}
    v = await probe(world, "field_equals", "customer.update", update,
                    path="$.status", value="closed")
    assert (v.holds, v.observed) == (False, "active")
    # the world changes behind the tool's back: the probe sees it, whatever the tool returned
    await pg.execute("UPDATE demo.customers SET status = 'closed' WHERE account_id = %s", (aid,))
    v = await probe(world, "field_equals", "customer.update", update,
                    path="$.status", value="closed")
    assert v.holds

    inv = {"invoice_id": acct.invoices[0][0]}
    await call(world, "billing.void_invoice", inv, key())
    v = await probe(world, "field_equals", "billing.void_invoice", inv,
                    path="$.status", value="void")
    assert v.holds

    # keyed by the step's idempotency key: before the call there is no record to read
    k = key()
    credit = {"account_id": aid, "amount_eur": 612.40}
    v = await probe(world, "field_not_equals", "billing.issue_credit", credit, k,
                    path="$.applied_to", value="suspense")
    assert not v.holds and "no record" in v.detail
    await call(world, "billing.issue_credit", credit, k)
    v = await probe(world, "field_not_equals", "billing.issue_credit", credit, k,
                    path="$.applied_to", value="suspense")
    assert (v.holds, v.observed) == (True, "account")
    await pg.execute("UPDATE demo.credits SET applied_to = 'suspense' WHERE idempotency_key = %s",
                     (k,))
    v = await probe(world, "field_not_equals", "billing.issue_credit", credit, k,
                    path="$.applied_to", value="suspense")
    assert (v.holds, v.observed) == (False, "suspense")

    k = key()
    mail = {"to": "ar@northwind.example", "template": "account_closed"}
    v = await probe(world, "field_present", "email.send", mail, k, path="$.message_id")
    assert not v.holds
    sent = await call(world, "email.send", mail, k)
    v = await probe(world, "field_present", "email.send", mail, k, path="$.message_id")
    assert (v.holds, v.observed) == (True, sent["message_id"])


# -- arguments --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("customer.get", {"account_id": "acct'; DROP TABLE demo.customers; --"}),
        ("customer.get", {"account_id": "acct_1", "extra": 1}),
        ("customer.update", {"account_id": "acct_1"}),  # changes nothing
        ("customer.update", {"account_id": "acct_1", "status": "deleted"}),
        ("customer.update", {"account_id": "acct_1", "billing_contact": "not an address"}),
        ("billing.issue_credit", {"account_id": "acct_1", "amount_eur": -5}),
        ("billing.cancel_subscription", {"sub_id": "sub_1", "at": "yesterday"}),
        ("billing.get_credit", {}),
        ("email.send", {"to": "a@b.example", "template": "../etc/passwd"}),
    ],
)
def test_arguments_are_validated(tool, args):
    with pytest.raises(ValidationError):
        TOOLS[tool].args.model_validate(args)


# -- end to end through the workflow ----------------------------------------------------------
async def test_restore_then_update_runs_end_to_end(client, settings, world, pg):
    acct = await new_account(world, archived=True)
    aid = acct.account_id
    plan = {
        "goal": f"close {aid}",
        "budget": {"replans_max": 0},
        "steps": [
            {"n": 1, "tool": "customer.restore", "args": {"account_id": aid},
             "post": {"probe": "field_equals", "path": "$.archived", "value": False},
             "on_unmet": "halt"},
            {"n": 2, "tool": "customer.update", "depends_on": [1],
             "args": {"account_id": aid, "status": "closed",
                      "billing_contact": "ar@northwind.example"},
             "post": {"probe": "field_equals", "path": "$.status", "value": "closed"}},
        ],
    }
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    assert rep.status == "succeeded", rep.failure
    assert [c.n for c in rep.completed] == [1, 2]
    assert await row(pg, "SELECT status, billing_contact, archived, archived_at, version "
                         "FROM demo.customers WHERE account_id = %s", aid) == (
        "closed", "ar@northwind.example", False, None, 3)
    # per step: one local read (the skip check) before the call, step 1's with the guards; the
    # verification is read in the tool's own activity right after it acts (field probes are
    # never fused with the next)
    assert await scheduled(client, rep.run_id) == {
        "guard.resolve": 1, "customer.restore": 1, "customer.update": 1,
        "probe.evaluate": 1}
    # the update's contract reads the record's version before it writes: again at the call
    assert [c.phase for c in rep.step(1).checks] == ["skip+pre", "post"]
    assert [c.phase for c in rep.step(2).checks] == ["skip+pre", "at-call", "post"]


async def test_the_incident_plan_stops_at_the_archived_record(client, settings, world, pg):
    """Seed 001's original six steps against the real tables: step 3's 409 is final and
    voids 4-6 (nothing cancelled, credited or sent); steps 1-2 bound and voided for real."""
    acct = await new_account(world, archived=True)
    aid = acct.account_id
    plan = {
        "goal": f"close out {aid}",
        "budget": {"replans_max": 0},
        "steps": [
            {"n": 1, "tool": "billing.list_invoices", "effect": "read",
             "args": {"account_id": aid},
             "binds": {"invoice_id": "$.invoice_id", "billing_contact": "$.billing_contact",
                       "sub_id": "$.sub_id", "amount_eur": "$.amount_eur"}},
            {"n": 2, "tool": "billing.void_invoice", "depends_on": [1],
             "args": {"invoice_id": "${invoice_id}"}},
            {"n": 3, "tool": "customer.update", "depends_on": [2],
             "args": {"account_id": aid, "status": "closed",
                      "billing_contact": "ar@northwind.example"}},
            {"n": 4, "tool": "billing.cancel_subscription", "depends_on": [1, 3],
             "args": {"sub_id": "${sub_id}", "at": "period_end"}},
            {"n": 5, "tool": "billing.issue_credit", "effect": "money", "depends_on": [1, 4],
             "args": {"account_id": aid, "amount_eur": "${amount_eur}"}},
            {"n": 6, "tool": "email.send", "effect": "external", "depends_on": [1, 5],
             "args": {"to": "${billing_contact}", "template": "account_closed"}},
        ],
    }
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    calls = await scheduled(client, rep.run_id)
    assert [calls[t] for t in ("billing.cancel_subscription", "billing.issue_credit",
                               "email.send")] == [0, 0, 0]
    assert (calls["billing.list_invoices"], calls["billing.void_invoice"],
            calls["customer.update"]) == (1, 1, 1)
    assert rep.status == "failed"
    assert rep.failure is not None
    assert (rep.failure.step, rep.failure.code, rep.failure.retryable) == (
        3, "record_archived", False)
    assert [c.n for c in rep.completed] == [1, 2]
    assert rep.completed[0].binds == {
        "invoice_id": acct.invoices[0][0], "billing_contact": acct.billing_contact,
        "sub_id": acct.subscriptions[0][0], "amount_eur": 612.40}
    assert await row(pg, "SELECT status FROM demo.invoices WHERE invoice_id = %s",
                     acct.invoices[0][0]) == ("void",)
    assert await row(pg, "SELECT status FROM demo.subscriptions WHERE sub_id = %s",
                     acct.subscriptions[0][0]) == ("active",)
    assert await count(pg, "SELECT count(*) FROM demo.credits WHERE account_id = %s", aid) == 0
