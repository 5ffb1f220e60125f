"""Seed 001's close-out end to end: the archived record stops step 3, the rest is void, the
re-planner routes around it, and the world ends where the goal wanted it. Each test closes out
its own copy of acct_3319f (the incident's account under fresh ids)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from plangate.demo.scenarios import NEW_CONTACT, closeout_facts, closeout_plan, seed_replanned_plan
from plangate.demo.schema import Account
from plangate.records.interface import PROPOSE_ACTIVITY
from plangate.testing import FakeOpenAI, attempts, model_backed, running_worker, scheduled
from tests.harness import incident_account


def closed(acct: Account) -> dict[str, Any]:
    """What the goal wants: the invoice void, the customer closed with the new contact, the
    subscription ending at period end, the credit on the account, the mail sent."""
    return {
        "customer": ("closed", False, NEW_CONTACT),
        "invoices": [(acct.invoices[0][0], "void")],
        "subscriptions": [(acct.subscriptions[0][0], "pending_cancellation")],
        "credits": [(612.4, "account")],
        "emails": [(NEW_CONTACT, "account_closed")],
    }


@pytest.fixture
async def acct(world):
    return await incident_account(world)


async def test_closeout_with_the_playbook(client, settings, pg, acct):
    async with running_worker(client, settings) as h:
        rep = await h.run_approving(closeout_plan(acct.account_id))
    assert rep.status == "succeeded", rep.escalation
    v1 = [s for s in rep.steps if s.plan_version == 1]
    assert [s.state for s in v1] == ["DONE", "DONE", "REPLANNED", "VOID", "VOID", "VOID"]
    # re-planned, then the re-plan accepted: final, not left as if still asked
    assert [t.state for t in v1[2].transitions][-2:] == ["REPLANNING", "REPLANNED"]
    assert v1[2].state.final and v1[2].answer == "replan"
    assert all(s.attempts == 0 for s in v1[3:])  # nothing dispatched after the failure
    assert rep.failure is not None
    assert (rep.failure.step, rep.failure.code, rep.failure.retryable) == (
        3,
        "record_archived",
        False,
    )
    assert rep.plan_version == 2 and rep.replans_used == 1
    calls = await scheduled(client, rep.run_id)
    assert calls["billing.void_invoice"] == 1  # voided exactly once over the whole run
    assert calls["customer.update"] == 2 and calls["customer.restore"] == 1
    assert calls["billing.cancel_subscription"] == calls["billing.issue_credit"] == 1
    assert calls["email.send"] == 1
    assert (await attempts(client, rep.run_id))["customer.update"] == [1, 1]
    assert await closeout_facts(pg, acct.account_id) == closed(acct)
    # the re-planned money and external steps each waited for a person's fresh card
    assert [(a.plan_version, a.step, a.card.tool, a.status) for a in rep.approvals] == [
        (2, 4, "billing.issue_credit", "approved"), (2, 5, "email.send", "approved"),
    ]


async def test_closeout_with_a_model(client, settings, pg, acct):
    aid = acct.account_id
    with FakeOpenAI(responses=[json.dumps(seed_replanned_plan(aid))]) as fake:
        model = model_backed(settings, fake)
        async with running_worker(client, settings, {PROPOSE_ACTIVITY: model.propose}) as h:
            rep = await h.run_approving(closeout_plan(aid))
        sent = [
            json.loads(m["content"])
            for m in fake.requests[0].messages
            if m["role"] == "user" and m["content"].lstrip().startswith("{")
        ]
    assert rep.status == "succeeded", rep.escalation
    assert len(fake.requests) == 1
    (req,) = sent
    completed = {c["n"]: c for c in req["completed"]}
    assert completed[1]["binds"] == {
        "invoice_id": acct.invoices[0][0],
        "sub_id": acct.subscriptions[0][0],
        "billing_contact": "ar@northwind-old.example",
        "amount_eur": 612.4,
    }
    assert completed[2]["tool"] == "billing.void_invoice"
    assert completed[2]["result"]["status"] == "void"  # the void invoice is handed over
    assert req["failure"]["code"] == "record_archived" and req["failure"]["step"] == 3
    assert [s["n"] for s in req["remaining"]] == [3, 4, 5, 6]
    assert req["budget"] == {"replans_used": 0, "replans_max": 2}
    calls = await scheduled(client, rep.run_id)
    assert calls["billing.void_invoice"] == 1 and calls["customer.restore"] == 1
    assert await closeout_facts(pg, aid) == closed(acct)


async def test_a_model_that_repeats_the_failed_remainder_spends_the_budget(
    client, settings, pg, acct
):
    aid = acct.account_id
    remainder = {
        "goal": "close",
        "steps": [
            dict(s, depends_on=[d - 2 for d in s.get("depends_on", []) if d > 3])
            | {"n": s["n"] - 2}
            for s in closeout_plan(aid)["steps"][2:]
        ],
    }
    with FakeOpenAI(responses=[json.dumps(remainder)] * 5) as fake:
        model = model_backed(settings, fake)
        async with running_worker(client, settings, {PROPOSE_ACTIVITY: model.propose}) as h:
            rep = await h.run_approving(closeout_plan(aid, replans_max=2))
        asked = len(fake.requests)
    assert asked == 2  # exactly replans_max, then an escalation, never a loop
    assert rep.status == "halted" and rep.escalation and "2 of 2" in rep.escalation
    assert [r.accepted for r in rep.replans] == [False, False]
    assert "no progress" in rep.replans[0].reason
    calls = await scheduled(client, rep.run_id)
    assert calls["customer.update"] == 1 and calls["billing.issue_credit"] == 0
    facts = await closeout_facts(pg, aid)
    assert facts["credits"] == [] and facts["emails"] == []


async def test_malformed_model_output_is_never_executed(client, settings, pg, acct):
    aid = acct.account_id
    unknown_tool = {
        "goal": "close",
        "steps": [
            {"n": 1, "tool": "billing.refund_everything", "args": {"account_id": aid}}
        ],
    }
    with FakeOpenAI(responses=["the account looks closed to me", json.dumps(unknown_tool)]) as fake:
        model = model_backed(settings, fake)
        async with running_worker(client, settings, {PROPOSE_ACTIVITY: model.propose}) as h:
            rep = await h.run_approving(closeout_plan(aid, replans_max=2))
    assert rep.status == "halted"
    assert [r.accepted for r in rep.replans] == [False, False]
    assert "not a plan" in rep.replans[0].reason
    assert any("unknown tool" in p for p in rep.replans[1].problems)
    calls = await scheduled(client, rep.run_id)
    assert set(calls) == {
        "guard.resolve",
        "probe.evaluate",
        "billing.list_invoices",
        "billing.void_invoice",
        "customer.update",
    }
    assert rep.plan_version == 1
