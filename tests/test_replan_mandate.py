"""A re-planned plan is untrusted input: reviewed as `plangate check --strict` reviews a plan
(paths against the worker's work directory, lint as errors) and held to the mandate of a
re-plan (no new money or external effects, no repeat of completed ones). Nothing of a refused
plan is dispatched; each refusal counts against the budget, with its reason."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from plangate.demo.scenarios import closeout_plan, seed_replanned_plan
from plangate.demo.schema import Account, seed_account
from plangate.records.interface import PROPOSE_ACTIVITY
from plangate.testing import FakeOpenAI, model_backed, running_worker, scheduled
from tests.harness import incident_account

OUTSIDE = "finance-team@attacker.example"


def index_plan(tag: str) -> dict[str, Any]:
    """Index a table that is not there yet (the index step fails for good), then mark a job."""
    return {"goal": f"index orders_{tag}", "budget": {"replans_max": 2}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "create_index",
                  "params": {"name": f"ix_{tag}", "table": f"orders_{tag}", "column": "id"}}},
        {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
         "args": {"statement": "set_job_state", "params": {"job_id": tag, "state": "done"}},
         "post": [{"probe": "job_state", "job_id": tag, "want": "done"}]},
    ]}


def slipped(tag: str, account: str) -> dict[str, Any]:
    """The remainder, plus a credit and a mail nobody asked for."""
    steps = index_plan(tag)["steps"]
    steps[0]["args"]["params"]["table"] = f"public.orders_{tag}"
    return {"steps": [
        *steps,
        {"n": 3, "tool": "billing.issue_credit", "depends_on": [2],
         "args": {"account_id": account, "amount_eur": 999999},
         "post": [{"probe": "field_not_equals", "path": "$.applied_to", "value": "suspense"}]},
        {"n": 4, "tool": "email.send", "depends_on": [3],
         "args": {"to": OUTSIDE, "template": "account_closed"}},
    ], "reason": "index the table and compensate the customer"}


async def outbox_to(pg: Any, address: str) -> int:
    cur = await pg.execute("SELECT count(*) FROM demo.outbox WHERE to_address = %s", (address,))
    return int((await cur.fetchone())[0])


async def credits_of(pg: Any, account: str) -> int:
    cur = await pg.execute("SELECT count(*) FROM demo.credits WHERE account_id = %s", (account,))
    return int((await cur.fetchone())[0])


async def test_a_model_that_slips_in_a_credit_and_a_mail_is_refused(
    client, settings, pg, world
):
    tag = uuid.uuid4().hex[:8]
    account = f"acct_{tag}"
    await seed_account(world, Account(account, f"ar@{account}.example", status="closed"))
    with FakeOpenAI(responses=[json.dumps(slipped(tag, account))] * 3) as fake:
        model = model_backed(settings, fake)
        async with running_worker(client, settings, {PROPOSE_ACTIVITY: model.propose}) as h:
            rep = await h.run(index_plan(tag))
        asked = len(fake.requests)
    assert asked == 2
    assert rep.status == "halted" and rep.plan_version == 1
    assert [r.accepted for r in rep.replans] == [False, False]
    for r in rep.replans:
        assert any("step 3" in p and "billing.issue_credit" in p and "not in the failed remainder"
                   in p for p in r.problems), r.problems
        assert any("step 4" in p and "email.send" in p for p in r.problems), r.problems
    assert rep.escalation and "2 of 2" in rep.escalation and "rejected" in rep.escalation
    calls = await scheduled(client, rep.run_id)
    assert calls.get("billing.issue_credit", 0) == 0 and calls.get("email.send", 0) == 0
    assert await credits_of(pg, account) == 0 and await outbox_to(pg, OUTSIDE) == 0


@pytest.mark.parametrize("change", ["repeat_void", "weaker_effect", "new_amount", "path"])
async def test_a_proposal_outside_its_mandate_is_refused(
    client, settings, pg, world, change, tmp_path
):
    acct = await incident_account(world)
    proposal = seed_replanned_plan(acct.account_id)
    steps = proposal["steps"]
    if change == "repeat_void":  # the invoice was voided by completed step 2
        steps.insert(0, {"n": 9, "tool": "billing.void_invoice",
                         "args": {"invoice_id": acct.invoices[0][0]},
                         "post": {"probe": "field_equals", "path": "$.status", "value": "void"}})
        want = "repeats completed step 2"
    elif change == "weaker_effect":
        steps[3]["effect"] = "read"
        want = "field effect: declares read, weaker than"
    elif change == "new_amount":
        steps[3]["args"]["amount_eur"] = 6124.0
        want = "not in the failed remainder"
    else:
        escape = Path(settings.world.workdir).parent / f"escaped-{uuid.uuid4().hex[:6]}.csv"
        steps.insert(0, {"n": 9, "tool": "s3.get", "effect": "read",
                         "args": {"bucket": "vendor-drops", "key": "k.csv",
                                  "dest": str(escape)}})
        want = "outside the work directory"
    with FakeOpenAI(responses=[json.dumps(proposal)]) as fake:
        model = model_backed(settings, fake)
        async with running_worker(client, settings, {PROPOSE_ACTIVITY: model.propose}) as h:
            rep = await h.run(closeout_plan(acct.account_id, replans_max=1))
    assert rep.status == "halted" and rep.replans_used == 1 and rep.plan_version == 1
    assert any(want in p for p in rep.replans[0].problems), rep.replans[0].problems
    calls = await scheduled(client, rep.run_id)
    assert calls["billing.void_invoice"] == 1 and calls.get("billing.issue_credit", 0) == 0
    assert calls.get("customer.restore", 0) == 0 and calls.get("s3.get", 0) == 0
    if change == "path":
        assert not escape.exists()


async def test_a_path_that_escapes_only_after_binding_is_refused_at_run_time(
    client, settings, world, s3
):
    # The record says "../../…": a value a tool returned, bound, then used as a path.
    aid = f"acct_{uuid.uuid4().hex[:8]}"
    escape = Path(settings.world.workdir).parent.parent / f"{aid}.csv"
    relative = "../../" + escape.name
    await seed_account(world, Account(aid, relative))
    bucket = f"bind-drops-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="x.csv", Body=b"a\n1\n")
    plan = {"goal": "fetch", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "billing.list_invoices", "effect": "read",
         "args": {"account_id": aid}, "binds": {"contact": "$.billing_contact"}},
        {"n": 2, "tool": "s3.get", "effect": "read", "depends_on": [1],
         "args": {"bucket": bucket, "key": "x.csv", "dest": "${contact}"}},
    ]}
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    assert rep.status == "failed"
    assert rep.failure is not None and rep.failure.step == 2
    assert rep.failure.code == "bad_arguments"
    assert "outside the work directory" in rep.failure.detail
    assert not escape.exists() and not escape.with_name(escape.name + ".part").exists()
