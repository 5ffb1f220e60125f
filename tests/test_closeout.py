"""Seed 001's close-out of acct_3319f end to end: the archived record stops step 3, the rest is
void, the re-planner routes around it, and the world ends where the goal wanted it."""

from __future__ import annotations

import json

import pytest

from activities.demo_schema import seed_acct_3319f
from plangate.scenarios import NEW_CONTACT, closeout_facts, closeout_plan, seed_replanned_plan
from tests.fake_openai import FakeOpenAI
from tests.harness import attempts, model_backed, running_worker, scheduled
from world.clients import World

CLOSED = {
    "customer": ("closed", False, NEW_CONTACT),
    "invoices": [("in_88a2", "void")],
    "subscriptions": [("sub_71c2", "pending_cancellation")],
    "credits": [(612.4, "account")],
    "emails": [(NEW_CONTACT, "account_closed")],
}


@pytest.fixture
async def seeded(settings):
    world = World(settings)
    await seed_acct_3319f(world)
    await world.close()


async def test_closeout_with_the_playbook(client, settings, pg, seeded):
    async with running_worker(client, settings) as h:
        rep = await h.run(closeout_plan())
    assert rep.status == "succeeded", rep.escalation
    v1 = [s for s in rep.steps if s.plan_version == 1]
    assert [s.state for s in v1] == ["DONE", "DONE", "REPLANNING", "VOID", "VOID", "VOID"]
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
    assert await closeout_facts(pg) == CLOSED


async def test_closeout_with_a_model(client, settings, pg, seeded):
    with FakeOpenAI(responses=[json.dumps(seed_replanned_plan())]) as fake:
        model = model_backed(settings, fake)
        async with running_worker(client, settings, {"replanner.propose": model.propose}) as h:
            rep = await h.run(closeout_plan())
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
        "invoice_id": "in_88a2",
        "sub_id": "sub_71c2",
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
    assert await closeout_facts(pg) == CLOSED


async def test_a_model_that_repeats_the_failed_remainder_spends_the_budget(
    client, settings, pg, seeded
):
    remainder = {
        "goal": "close",
        "steps": [
            dict(s, depends_on=[d - 2 for d in s.get("depends_on", []) if d > 3])
            | {"n": s["n"] - 2}
            for s in closeout_plan()["steps"][2:]
        ],
    }
    with FakeOpenAI(responses=[json.dumps(remainder)] * 5) as fake:
        model = model_backed(settings, fake)
        async with running_worker(client, settings, {"replanner.propose": model.propose}) as h:
            rep = await h.run(closeout_plan(replans_max=2))
        asked = len(fake.requests)
    assert asked == 2  # exactly replans_max, then an escalation, never a loop
    assert rep.status == "halted" and rep.escalation and "2 of 2" in rep.escalation
    assert [r.accepted for r in rep.replans] == [False, False]
    assert "no progress" in rep.replans[0].reason
    calls = await scheduled(client, rep.run_id)
    assert calls["customer.update"] == 1 and calls["billing.issue_credit"] == 0
    facts = await closeout_facts(pg)
    assert facts["credits"] == [] and facts["emails"] == []


async def test_malformed_model_output_is_never_executed(client, settings, pg, seeded):
    unknown_tool = {
        "goal": "close",
        "steps": [
            {"n": 1, "tool": "billing.refund_everything", "args": {"account_id": "acct_3319f"}}
        ],
    }
    with FakeOpenAI(responses=["the account looks closed to me", json.dumps(unknown_tool)]) as fake:
        model = model_backed(settings, fake)
        async with running_worker(client, settings, {"replanner.propose": model.propose}) as h:
            rep = await h.run(closeout_plan(replans_max=2))
    assert rep.status == "halted"
    assert [r.accepted for r in rep.replans] == [False, False]
    assert "not a plan" in rep.replans[0].reason
    assert any("unknown tool" in p for p in rep.replans[1].problems)
    calls = await scheduled(client, rep.run_id)
    assert set(calls) == {
        "probe.evaluate",
        "billing.list_invoices",
        "billing.void_invoice",
        "customer.update",
    }
    assert rep.plan_version == 1
