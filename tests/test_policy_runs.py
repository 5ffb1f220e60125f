"""The deployment's Cedar policies decide every call of a run (issue 36): a credit over the cap
is refused at ``check``, by the worker at a start that skipped the client's check, and by the
tool's activity scheduled directly; an hourly limit holds for ten runs started at once
(calls in flight counted: exactly five credits, never six); a policy file changed while a run
waits is in force at its call (412 ``policy_superseded``, nothing sent). Real Cedar, the real
worker, Postgres rows and the Temporal history."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from plangate.activities.catalogue import catalogue
from plangate.activities.tool_activity import tool_activities
from plangate.client.api import Plangate
from plangate.client.checked import check
from plangate.plans.load import PlanError
from plangate.records import keys
from plangate.records.calls import StepRef, ToolCall, ToolFailure
from plangate.records.interface import DECIDE_ACTIVITY
from plangate.records.run import Decided, DecideRequest
from plangate.testing import running_worker, scheduled
from plangate.world.clients import World
from plangate.world.policies import load_bundle
from plangate.world.settings import Settings
from tests.grants import money_card, refused_with
from tests.test_mcp_guarded import account, credits

CREDIT = "billing.issue_credit"
BASE = '@id("base")\npermit(principal, action, resource);\n'
CAP = ('@id("credit-cap")\nforbid(principal, action == Plangate::Action::"money", resource)\n'
       'when { resource.tool == "billing.issue_credit" && context.amount_cents > 100000 };\n')
HOURLY = ('@id("hourly-limit")\n'
          'forbid(principal, action == Plangate::Action::"money", resource)\n'
          'when { context.totals.amount_cents_hour + context.amount_cents > 500000 };\n')


def with_policies(settings: Settings, directory: Path) -> Settings:
    return replace(settings, policy=replace(settings.policy, policies=directory))


def policies(tmp_path: Path, *texts: str) -> Path:
    d = tmp_path / "policies"
    d.mkdir(exist_ok=True)
    for i, text in enumerate(texts):
        (d / f"p{i}.cedar").write_text(text)
    return d


def credit_plan(aid: str, amount: float, principal: str | None = None) -> dict[str, Any]:
    plan: dict[str, Any] = {"goal": f"credit {aid}", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": CREDIT, "args": {"account_id": aid, "amount_eur": amount}}]}
    if principal is not None:
        plan["on_behalf_of"] = principal
    return plan


async def test_a_credit_over_the_cap_is_refused_at_check_start_and_call(
    client: Client, settings: Settings, world: World, pg: Any, tmp_path: Path
) -> None:
    directory = policies(tmp_path, BASE, CAP)
    strict = with_policies(settings, directory)
    aid = await account(world)
    plan = credit_plan(aid, 1500.0)
    with pytest.raises(PlanError) as refused:
        check(plan, strict)
    assert str(refused.value).startswith(
        "step 1: policy_denied (403): billing.issue_credit is forbidden by the deployment's "
        "policy (credit-cap, bundle cedar:")
    async with running_worker(client, strict) as h:
        # a client that does not know the policies (its own settings): the worker refuses
        lax = Plangate(client, replace(h.settings, policy=settings.policy))
        run_id = await lax.start(plan)
        rep = await lax.result(run_id)
    assert rep.failure is not None and rep.failure.code == "policy_denied"
    assert "credit-cap" in rep.failure.detail
    assert CREDIT not in await scheduled(client, run_id)
    # the tool's activity scheduled directly, as a workflow of anyone's might
    bundle = load_bundle(strict.policy, strict.world.scope, catalogue(strict.catalogue))
    act = tool_activities(world, strict.catalogue, strict.policy)[CREDIT]
    run = f"plan-{uuid.uuid4().hex[:12]}"
    call = ToolCall(step=StepRef(run_id=run, plan_version=1, n=1, tool=CREDIT,
                                 args={"account_id": aid, "amount_eur": 1500.0}),
                    idempotency_key=keys.idempotency_key(run, uuid.uuid4().hex[:16], "v1/1"),
                    policy_bundle=bundle.bundle)
    env = ActivityEnvironment()
    env.info = replace(env.info, workflow_id=run)
    with pytest.raises(ApplicationError) as at_call:
        await env.run(act, call)
    failure = ToolFailure.model_validate(at_call.value.details[0])
    assert (at_call.value.type, failure.status) == ("policy_denied", 403)
    assert failure.detail.startswith(
        "not called: billing.issue_credit forbidden by the deployment's policy (credit-cap)")
    assert await credits(pg, aid) == 0
    cur = await pg.execute("SELECT count(*) FROM plangate.effects WHERE run_id = %s", (run,))
    assert (await cur.fetchone())[0] == 0  # refused before its intent was recorded
    # each refusal kept where it is counted: at the worker's guards, and at the call
    assert await kept(pg, run_id) == [("forbid", ["credit-cap"], True, False)]
    assert await kept(pg, run) == [("forbid", ["credit-cap"], True, True)]


async def kept(pg: Any, run_id: str) -> list[tuple[Any, ...]]:
    cur = await pg.execute(
        "SELECT outcome, policies, enforced, at_call FROM plangate.policy_decisions "
        "WHERE run_id = %s ORDER BY id", (run_id,))
    return [tuple(r) for r in await cur.fetchall()]


async def test_shadow_mode_refuses_nothing_and_the_report_lists_what_it_would_have(
    client: Client, settings: Settings, stack: Any, world: World, pg: Any, tmp_path: Path
) -> None:
    import json
    import os
    import subprocess
    import sys

    directory = policies(tmp_path, BASE, CAP)
    shadow = replace(settings, policy=replace(settings.policy, policies=directory,
                                              policy_mode="shadow"))
    aid = await account(world)
    async with running_worker(client, shadow) as h:
        api = Plangate(client, h.settings)
        rep = await api.result(await api.start(credit_plan(aid, 1500.0)))
        queue = h.settings.temporal.task_queue
    assert rep.status.value == "succeeded" and await credits(pg, aid) == 1
    assert await kept(pg, rep.run_id) == [("forbid", ["credit-cap"], False, False),
                                          ("forbid", ["credit-cap"], False, True)]
    env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": queue,
           "PLANGATE_POLICIES": str(directory), "PLANGATE_POLICY_MODE": "shadow"}
    def report(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "plangate", "report", "--since", "1h",
                               *extra], env=env, capture_output=True, text=True, timeout=120)

    done = await asyncio.to_thread(report, "--json")
    assert done.returncode == 0, done.stderr
    mine = [w for w in json.loads(done.stdout)["policy"]["would_refuse"]
            if w["run_id"] == rep.run_id]
    assert [(w["step"], w["tool"], w["policies"], w["at_call"]) for w in mine] == [
        (1, CREDIT, ["credit-cap"], True), (1, CREDIT, ["credit-cap"], False)]
    text = await asyncio.to_thread(report)
    assert text.returncode == 0, text.stderr
    assert f"  would refuse: {rep.run_id} step 1 {CREDIT} (at the call; credit-cap; cedar:" \
        in text.stdout


async def test_a_versions_steps_are_decided_in_one_cedar_call_and_their_calls_take_it(
    client: Client, settings: Settings, world: World, pg: Any, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two credits over the cap in shadow mode: the worker's guards decide both steps in one
    Cedar call, and each call takes its step's decision (the same request, the policies read
    neither the time, the check nor the totals): Cedar is asked once in the whole run, and
    each decision is kept at the guards and at the call, the call's dated at the call."""
    import cedarpy

    asked: list[int] = []
    real = cedarpy.is_authorized_batch

    def counted(requests: list[dict[str, Any]], *a: Any, **kw: Any) -> Any:
        asked.append(len(requests))
        return real(requests, *a, **kw)

    monkeypatch.setattr(cedarpy, "is_authorized_batch", counted)
    shadow = replace(settings, policy=replace(settings.policy, policies=policies(
        tmp_path, BASE, CAP), policy_mode="shadow"))
    aids = [await account(world), await account(world)]
    plan = {"goal": "two credits", "budget": {"replans_max": 0}, "steps": [
        {"n": n, "tool": CREDIT, "args": {"account_id": aid, "amount_eur": 1500.0}}
        for n, aid in enumerate(aids, 1)]}
    async with running_worker(client, shadow) as h:
        lax = Plangate(client, replace(h.settings, policy=settings.policy))  # decides nothing
        rep = await lax.result(await lax.start(plan))
    assert rep.status.value == "succeeded"
    assert [await credits(pg, aid) for aid in aids] == [1, 1]
    assert len(asked) == 1  # the guards' one call; none at the calls
    cur = await pg.execute(
        "SELECT step, outcome, policies, at_call, decided_at FROM plangate.policy_decisions "
        "WHERE run_id = %s ORDER BY at_call, step", (rep.run_id,))
    rows = await cur.fetchall()
    assert [r[:4] for r in rows] == [(n, "forbid", ["credit-cap"], at_call)
                                     for at_call in (False, True) for n in (1, 2)]
    assert all(rows[i + 2][4] > rows[i][4] for i in (0, 1))  # the call's own time


MakeRole = Callable[[], Awaitable[str]]


async def test_an_hourly_limit_holds_for_runs_started_at_once(
    client: Client, settings: Settings, world: World, pg: Any, tmp_path: Path, principal: str
) -> None:
    strict = with_policies(settings, policies(tmp_path, BASE, CAP, HOURLY))
    aid = await account(world)
    async with running_worker(client, strict) as h:
        api = Plangate(client, h.settings)
        runs = await asyncio.gather(*(api.start(credit_plan(aid, 1000.0, principal))
                                      for _ in range(10)))
        reports = await asyncio.gather(*(api.result(r) for r in runs))
    assert await credits(pg, aid) == 5
    ended = sorted((r.status.value, r.failure.code if r.failure else "") for r in reports)
    assert ended == [("halted", "policy_denied")] * 5 + [("succeeded", "")] * 5, ended
    # a refusal at the call names the policy that refused, not an authority lost
    reasons = {r.steps[0].reason for r in reports if r.failure is not None}
    assert reasons == {"policy_denied (403): billing.issue_credit forbidden by the "
                       "deployment's policy (hourly-limit): forbidden by hourly-limit"}, reasons
    cur = await pg.execute(
        "SELECT state, count(*), sum(amount), resource FROM plangate.effects "
        "WHERE principal = %s GROUP BY state, resource", (principal,))
    assert await cur.fetchall() == [("done", 5, 5000, "table:demo.credits")]


NO_MONEY = ('@id("no-money")\nforbid(principal, action == Plangate::Action::"money", '
            'resource);\n')


@pytest.mark.parametrize(("change", "credited"), [("forbid", 0), ("lift", 1)])
async def test_policies_changed_while_a_card_waits_decide_its_call_again(
    client: Client, settings: Settings, world: World, pg: Any, tmp_path: Path, change: str,
    credited: int,
) -> None:
    """A 500 EUR credit waits for its card (person-over-100). The files change; the card is
    approved; the call meets another bundle in force: 412, nothing sent, the version decided
    again under the new bundle: now forbidden, the run halts (0 credits); now permitted
    without a person, it runs once (1 credit), without another card."""
    directory = policies(tmp_path, BASE, PERSON)
    strict = with_policies(settings, directory)
    aid = await account(world)
    async with running_worker(client, strict) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(credit_plan(aid, 500.0))
        await api.wait_for_card(run_id)
        rep = await api.report(run_id)
        (card,) = rep.approvals
        before = card.card.policy_bundle
        if change == "forbid":
            (directory / "p9.cedar").write_text(NO_MONEY)
        else:
            (directory / "p1.cedar").unlink()  # person-over-100 gone: the base alone
        await api.approve(run_id, card.step, card.digest, by="erin")
        rep = await api.result(run_id)
    assert await credits(pg, aid) == credited
    (step,) = rep.steps
    assert step.policy is not None and step.policy.bundle != before
    assert rep.metrics.answers_412 == 1
    if change == "forbid":
        assert rep.status.value == "halted"
        assert rep.failure is not None and rep.failure.code == "policy_denied"
        assert "no-money" in rep.failure.detail
    else:
        assert rep.status.value == "succeeded" and len(rep.approvals) == 1
        assert step.policy.outcome == "permit"
    calls = (await scheduled(client, run_id)).get(CREDIT)
    assert calls == (2 if change == "lift" else 1)  # the refused call and, lifted, the one


@pytest.mark.parametrize(("texts", "totals", "observed"), [
    ((BASE, CAP), False, False),
    ((BASE, HOURLY), True, False),
    ((BASE, '@id("seen")\nforbid(principal, action, resource)\n'
            'when { context.observed.contains({condition: "job_state(job_id=j)", '
            'value: "failed"}) };\n'), False, True),
])
def test_a_call_waits_for_what_its_policies_read(
    settings: Settings, tmp_path: Path, texts: tuple[str, ...], totals: bool, observed: bool
) -> None:
    """Only a bundle that reads the running totals takes the ledger's lock at the call, and
    only one that reads what the check at the call observed waits for it."""
    from plangate.activities.policing import reads_observed, reads_totals

    s = with_policies(settings, policies(tmp_path, *texts))
    bundle = load_bundle(s.policy, s.world.scope, catalogue(s.catalogue))
    assert (reads_totals(bundle), reads_observed(bundle)) == (totals, observed)


PERSON = ('@id("person-over-100") @approvers("1")\n'
          'permit(principal, action == Plangate::Action::"money", resource)\n'
          'when { context.amount_cents > 10000 };\n')


async def test_a_threshold_sends_a_card_naming_its_policy(
    client: Client, settings: Settings, world: World, pg: Any, tmp_path: Path
) -> None:
    """Over 100 EUR needs a person (the policy alone: approval by effect is off in the test
    deployment), at most 100 runs without; the card and the step's report name the policy."""
    from plangate.client.view import card_lines

    strict = with_policies(settings, policies(tmp_path, BASE, PERSON))
    small, large = await account(world), await account(world)
    async with running_worker(client, strict) as h:
        api = Plangate(client, h.settings)
        quick = await api.result(await api.start(credit_plan(small, 50.0)))
        waits = await api.start(credit_plan(large, 500.0))
        await api.wait_for_card(waits)
        rep = await api.report(waits)
        assert rep.status.value == "awaiting_approval"
        assert await credits(pg, large) == 0
        (card,) = rep.approvals
        assert card.card.policy is not None
        assert (card.card.policy.outcome, card.card.policy.approvers) == ("permit_with_people", 1)
        assert "person-over-100" in card.card.policy.policies
        assert any(line.startswith("    asked by the policy ") and "person-over-100" in line
                   for line in card_lines(rep))
        await api.approve(waits, card.step, card.digest, by="erin")
        done = await api.result(waits)
    assert quick.status.value == "succeeded" and quick.approvals == []
    assert quick.steps[0].policy is not None and quick.steps[0].policy.outcome == "permit"
    assert done.status.value == "succeeded"
    assert done.steps[0].policy is not None
    assert done.steps[0].policy.outcome == "permit_with_people"
    assert (await credits(pg, small), await credits(pg, large)) == (1, 1)


def owed_plan(aid: str) -> dict[str, Any]:
    """Credit what the account's open invoice says it is owed: the amount bound by step 1."""
    return {"goal": f"credit {aid} what it is owed", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "billing.list_invoices", "args": {"account_id": aid},
         "binds": {"owed": "$.amount_eur"}},
        {"n": 2, "tool": CREDIT, "depends_on": [1],
         "args": {"account_id": aid, "amount_eur": "${owed}"}}]}


async def owing(world: World, amount: str) -> str:
    from decimal import Decimal

    from plangate.demo.schema import Account, seed_account

    aid = f"acct_{uuid.uuid4().hex[:8]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", status="closed",
                                      invoices=((f"inv_{aid}", Decimal(amount), "open"),)))
    return aid


async def test_a_bound_amount_is_decided_once_bound_a_card_or_a_halt_naming_its_policy(
    client: Client, settings: Settings, world: World, pg: Any, tmp_path: Path
) -> None:
    """A credit whose amount an earlier step binds (``${owed}``, as the demo's close-out binds
    its credit) is decided in the workflow once the value is bound, before the call: over the
    people threshold it waits for a card naming the bound amount and the policy (0 credits
    until approved, then 1), where it used to be decided only at the call and halt
    ``approval_missing``; over the cap it halts naming the cap, its tool never scheduled."""
    strict = with_policies(settings, policies(tmp_path, BASE, PERSON, CAP))
    aid, over = await owing(world, "612.40"), await owing(world, "1612.40")
    async with running_worker(client, strict) as h:
        api = Plangate(client, h.settings)
        run_id, capped = await api.start(owed_plan(aid)), await api.start(owed_plan(over))
        await api.wait_for_card(run_id)
        rep = await api.report(run_id)
        assert rep.status.value == "awaiting_approval", rep.failure
        (card,) = rep.approvals
        assert card.step == 2 and card.card.args["amount_eur"] == 612.4
        assert card.card.policy is not None and rep.steps[1].policy == card.card.policy
        assert card.card.policy.outcome == "permit_with_people"
        assert "person-over-100" in card.card.policy.policies
        assert await credits(pg, aid) == 0
        await api.approve(run_id, card.step, card.digest, by="erin")
        done = await api.result(run_id)
        halted = await api.result(capped)
    assert done.status.value == "succeeded", done.failure
    assert await credits(pg, aid) == 1
    cur = await pg.execute("SELECT amount_eur FROM demo.credits WHERE account_id = %s", (aid,))
    assert str((await cur.fetchone())[0]) == "612.40"
    assert halted.status.value == "halted" and halted.failure is not None
    assert (halted.failure.code, halted.failure.step) == ("policy_denied", 2)
    assert "with its bound arguments is forbidden by the deployment's policy (credit-cap" \
        in halted.failure.detail
    assert halted.steps[1].reason == "forbidden by the deployment's policy (credit-cap)"
    assert CREDIT not in await scheduled(client, capped) and await credits(pg, over) == 0
    # the guards decided each as written (amount unbound: a plain permit, not kept); the bound
    # calls are kept as decided before them, the approved one at its call too
    assert await kept(pg, capped) == [("forbid", ["credit-cap"], True, False)]
    assert await kept(pg, run_id) == [
        ("permit_with_people", ["base", "person-over-100"], True, False),
        ("permit_with_people", ["base", "person-over-100", "plangate:approval-asked"], True,
         True)]


async def test_a_bound_step_whose_early_decision_fails_is_decided_at_its_call_alone(
    client: Client, settings: Settings, world: World, pg: Any, tmp_path: Path
) -> None:
    """``guard.decide`` is an early word, never the last: where it cannot answer (here a bug
    of its own, every try), the run is not failed by it; the call decides itself, and refuses
    the credit a person must approve (``approval_missing``), nothing credited."""
    tries = 0

    @activity.defn(name=DECIDE_ACTIVITY)
    async def broken(req: DecideRequest) -> Decided:
        nonlocal tries
        tries += 1
        raise RuntimeError("a bug in the early decision")

    strict = with_policies(settings, policies(tmp_path, BASE, PERSON))
    aid = await owing(world, "612.40")
    async with running_worker(client, strict, {DECIDE_ACTIVITY: broken}) as h:
        api = Plangate(client, h.settings)
        rep = await api.result(await api.start(owed_plan(aid)))
    assert tries == 3  # its retries spent
    assert rep.status.value == "halted" and rep.failure is not None, rep.failure
    assert (rep.failure.code, rep.failure.step) == ("approval_missing", 2)
    assert await credits(pg, aid) == 0


TWO = ('@id("two-over-10000") @approvers("2")\n'
       'permit(principal, action == Plangate::Action::"money", resource)\n'
       'when { context.amount_cents > 1000000 };\n')


async def test_two_people_are_two_distinct_approvers(
    client: Client, settings: Settings, world: World, pg: Any, tmp_path: Path
) -> None:
    """Over 10,000 EUR waits for two distinct approvers: one approval is not enough (the card
    waits on, nothing credited), the same approver again is refused, a second one lets it
    run; the tool's activity verifies both proofs."""
    from plangate.client.api import AnswerRefused
    from plangate.client.view import card_lines

    strict = with_policies(settings, policies(tmp_path, BASE, TWO))
    aid = await account(world)
    async with running_worker(client, strict) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(credit_plan(aid, 20000.0))
        await api.wait_for_card(run_id)
        rep = await api.report(run_id)
        (card,) = rep.approvals
        assert card.needed == 2
        await api.approve(run_id, card.step, card.digest, by="erin")
        rep = await api.report(run_id)
        assert rep.status.value == "awaiting_approval" and rep.approvals[0].status == "pending"
        assert [a.by for a in rep.approvals[0].approvals] == ["erin"]
        assert any("approved by erin" in line and "(1 of 2)" in line for line in card_lines(rep))
        assert await credits(pg, aid) == 0
        with pytest.raises(AnswerRefused) as again:
            await api.approve(run_id, card.step, card.digest, by="erin")
        assert str(again.value) == ("erin approved the card of step 1 already: it waits for 2 "
                                    "distinct approvers")
        await api.approve(run_id, card.step, card.digest, by="frank")
        done = await api.result(run_id)
    assert done.status.value == "succeeded", done.failure
    (record,) = done.approvals
    assert record.status == "approved" and record.answer is not None
    assert ([a.by for a in record.approvals], record.answer.by) == (["erin"], "frank")
    assert await credits(pg, aid) == 1


def test_a_replanned_step_is_decided_by_the_policies_too(settings: Settings, tmp_path: Path
                                                       ) -> None:
    """The review of a re-planned proposal decides its steps under the bundle in force: a
    forbidden one is a problem of the proposal (nothing of it runs), one the policy asks a
    person for waits for a card naming the policy."""
    from plangate.plans.load import parse_plan
    from plangate.records.replan import ReplanBudget, ReplanRequest, ReviewRequest
    from plangate.records.report import FailureRecord
    from plangate.replanner.review import review

    s = with_policies(settings, policies(tmp_path, BASE, CAP, PERSON))
    cedar = load_bundle(s.policy, s.world.scope, catalogue(s.catalogue))
    def proposal(amount: float) -> ReviewRequest:
        """A proposal keeping the failed plan's own money step (a re-plan adds none)."""
        plan = parse_plan(credit_plan("acct_x", amount))
        request = ReplanRequest(
            goal="credit", completed=[], remaining=plan.steps,
            budget=ReplanBudget(replans_used=1, replans_max=2),
            failure=FailureRecord(step=1, tool=CREDIT, plan_version=1, code="not_found",
                                  retryable=False))
        return ReviewRequest(plan=plan, request=request)

    refused = review(proposal(1500.0), s.catalogue, s.world, s.policy, cedar)
    assert refused.plan is None
    assert [p.split(" (credit-cap, bundle ")[0] for p in refused.problems] == [
        "step 1: billing.issue_credit is forbidden by the deployment's policy"]
    waits = review(proposal(500.0), s.catalogue, s.world, s.policy, cedar).plan
    assert waits is not None and waits.guard(1).approval
    mark = waits.guard(1).policy
    assert mark is not None and "person-over-100" in mark.policies
    # a re-planned money step waits for a person whatever the amount (plangate's own rule, a
    # built-in policy of the bundle): the decision names it
    small = review(proposal(50.0), s.catalogue, s.world, s.policy, cedar).plan
    assert small is not None
    mark = small.guard(1).policy
    assert mark is not None and "plangate:approval-asked" in mark.policies


async def test_approvals_a_call_carries_count_only_when_their_proofs_hold(
    settings: Settings, world: World, pg: Any, tmp_path: Path
) -> None:
    """A workflow of anyone's schedules the credit directly, saying it needs no person and
    carrying a grant with two approvers' names whose proofs do not verify: the policy asks
    two distinct approvers, the activity counts none, nothing is credited."""

    from plangate.records.approvals import ApprovalProof
    from plangate.records.proofs import ApprovalGrant

    strict = with_policies(settings, policies(tmp_path, BASE, TWO))
    bundle = load_bundle(strict.policy, strict.world.scope, catalogue(strict.catalogue))
    act = tool_activities(world, strict.catalogue, strict.policy)[CREDIT]
    aid = await account(world)
    card = money_card(CREDIT, {"account_id": aid, "amount_eur": 20000.0})
    now = card.issued_at

    def forged(name: str) -> ApprovalProof:
        return ApprovalProof(approver=name, signed_at=now, signature="AAAA")

    grant = ApprovalGrant(card=card, digest=card.digest(), proof=forged("erin"),
                          others=[(forged("frank"), "")])
    assert await refused_with(act, card, bundle.bundle, grant) == ("approval_missing", (
        "not called: the deployment's policy (base, two-over-10000) asks 2 distinct approvers "
        "of billing.issue_credit; 0 approved"))
    assert await credits(pg, aid) == 0
