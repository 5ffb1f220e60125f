"""The deployment enforces the guard (issue 19): nothing a submitter, a model or a Temporal
client sends can weaken it. Every run here is tried as an attacker would try it, against the
real worker assembly, and judged by the world: credits in ``demo.credits``, tables in the
catalogue, activities in the Temporal history.

- the worker derives every guard itself: a client without the deployment's settings, and a
  raw start whose input weakens every guard, both meet a card;
- the tool's own activity refuses a money call that carries no proven approval, whoever
  scheduled it;
- a re-plan never drops an approval, and its money steps wait for a fresh card;
- an answer counts only with an approver's proof (not by Update, not by signal, not from the
  run's own submitter);
- principals are bound to submitters, refused before a workflow starts and again by the worker;
  and a run never acts as a superuser.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from psycopg import sql
from temporalio import workflow
from temporalio.client import WorkflowUpdateFailedError
from temporalio.common import RetryPolicy
from temporalio.service import RPCError
from temporalio.worker import Worker

from plangate.client.api import AnswerRefused, Plangate
from plangate.demo.schema import Account, seed_account
from plangate.plans.load import PlanError, parse_plan
from plangate.plans.model import Effect
from plangate.records.approvals import ApprovalAnswer, ApprovalDecision
from plangate.records.calls import StepRef, ToolCall
from plangate.records.interface import PROPOSE_ACTIVITY
from plangate.records.proofs import Submitter, sign_submission
from plangate.records.report import RunReport
from plangate.records.run import Carried, RunInput
from plangate.records.signing import SigningKey
from plangate.testing import FakeOpenAI, ended, model_backed, running_worker, scheduled
from plangate.worker.assembly import activities
from plangate.workflows.plan_run import PlanRunWorkflow
from plangate.world.clients import World
from plangate.world.settings import Identity, Settings

MONEY = (Effect.MONEY, Effect.EXTERNAL)


def money_waits(settings: Settings) -> Settings:
    """A deployment whose money and external steps wait for a person."""
    return replace(settings, policy=replace(settings.policy, approve_effects=MONEY))


async def account(world: World) -> str:
    aid = f"acct_{uuid.uuid4().hex[:8]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", status="closed"))
    return aid


def credit(aid: str, amount: float = 99.0, **step: Any) -> dict[str, Any]:
    return {"goal": f"credit {aid}", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "billing.issue_credit",
         "args": {"account_id": aid, "amount_eur": amount}, **step},
    ]}


async def credits(pg: Any, aid: str) -> int:
    cur = await pg.execute("SELECT count(*) FROM demo.credits WHERE account_id = %s", (aid,))
    return int((await cur.fetchone())[0])


async def pending_card(api: Plangate, run_id: str, step: int = 1, version: int = 1) -> Any:
    for _ in range(300):
        rep = await api.report(run_id)
        for a in rep.approvals:
            if (a.step, a.plan_version, a.status) == (step, version, "pending"):
                return a
        if rep.status.final:
            raise AssertionError(f"{run_id} ended {rep.status} without a card: {rep.failure}")
        await asyncio.sleep(0.05)
    raise AssertionError(f"no card waits for step {step} of {run_id}")


async def test_a_client_without_the_deployments_setting_still_meets_the_card(
    client, settings, pg, world
):
    aid = await account(world)
    worker = money_waits(settings)
    async with running_worker(client, worker) as h:
        # the submitting client's own settings name no effect that waits for a person
        api = Plangate(client, replace(h.settings, policy=replace(h.settings.policy,
                                                                  approve_effects=())))
        run_id = await api.start(credit(aid))
        card = await pending_card(api, run_id)
        await asyncio.sleep(0.5)  # time enough for a call that would not wait
        assert await credits(pg, aid) == 0
        assert (await scheduled(client, run_id)).get("billing.issue_credit", 0) == 0
        await api.approve(run_id, 1, card.digest, by="erin")
        rep = await api.result(run_id)
    assert rep.status == "succeeded" and await credits(pg, aid) == 1
    assert rep.approvals[0].answer is not None and rep.approvals[0].answer.by == "erin"


async def test_a_raw_start_that_weakens_every_guard_still_meets_the_card(
    client, settings, pg, world
):
    aid = await account(world)
    worker = money_waits(settings)
    # a legitimate input, every guard it can name weakened: the step says read, no approval
    # (resolved guards it cannot carry at all: ``RunInput.plan`` is the plan alone)
    weak = parse_plan(credit(aid, 1000.0, effect="read"))
    async with running_worker(client, worker) as h:
        run_id = f"raw-{uuid.uuid4().hex[:8]}"
        await client.start_workflow(
            PlanRunWorkflow.run, RunInput(plan=weak), id=run_id,
            task_queue=h.queue,
        )
        api = Plangate(client, h.settings)
        card = await pending_card(api, run_id)
        assert card.card.effect == "money"  # the tool's effect, not what the input said
        await asyncio.sleep(0.5)
        assert await credits(pg, aid) == 0
        await api.approve(run_id, 1, card.digest, by="erin")
        rep = await api.result(run_id)
    assert rep.status == "succeeded" and await credits(pg, aid) == 1


@workflow.defn(name="Rogue", sandboxed=False)  # an attacker's code: no sandbox needed
class RogueWorkflow:
    """Anyone's workflow on the deployment's queue, calling the money tool by name with no
    approval at all."""

    @workflow.run
    async def run(self, call: ToolCall) -> str:
        try:
            await workflow.execute_activity(
                "billing.issue_credit", call, start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
        except Exception as e:  # the refusal is the answer under test
            return str(getattr(e, "cause", None) or e)
        return "issued"


async def test_the_tool_refuses_a_money_call_with_no_proven_approval(client, settings, pg,
                                                                     world):
    aid = await account(world)
    s = replace(money_waits(settings),
                temporal=replace(settings.temporal, task_queue=f"rogue-{uuid.uuid4().hex[:8]}"))
    w = World(s.world)
    try:
        acts = list(activities(w, s).values())
        async with Worker(client, task_queue=s.temporal.task_queue, workflows=[RogueWorkflow],
                          activities=acts):
            for approval_required in (False, True):
                call = ToolCall(
                    step=StepRef(run_id="rogue", plan_version=1, n=1,
                                 tool="billing.issue_credit",
                                 args={"account_id": aid, "amount_eur": 1000.0}),
                    idempotency_key=f"rogue-{uuid.uuid4().hex}",
                    approval_required=approval_required,
                )
                said = await client.execute_workflow(
                    RogueWorkflow.run, call, id=f"rogue-{uuid.uuid4().hex[:8]}",
                    task_queue=s.temporal.task_queue, result_type=str,
                )
                assert "needs a person's approval and the call carries none" in said, said
    finally:
        await w.close()
    assert await credits(pg, aid) == 0


async def test_an_answer_counts_only_with_an_approvers_proof(client, settings, pg, world):
    aid = await account(world)
    mallory = SigningKey.generate("mallory")  # a key the deployment does not list
    async with running_worker(client, money_waits(settings)) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(credit(aid, 25.0))
        card = await pending_card(api, run_id)
        handle = api.handle(run_id)
        # the right digest, sent as a raw Update with a name and no proof
        for name in ("approve", "reject"):
            with pytest.raises(WorkflowUpdateFailedError) as e:
                await handle.execute_update(name, ApprovalAnswer(
                    step=1, digest=card.digest, by="someone", reason="no",
                    decision=ApprovalDecision(name),
                ))
            assert "no approver's proof" in str(e.value.cause)
        # and as a signal (what the Web UI's HTTP API sends)
        await handle.signal("answer", ApprovalAnswer(step=1, digest=card.digest,
                                                     by="web-ui-anon"))
        # a proof by a key nobody listed
        mine = replace(h.settings.identity, approver_keys=(mallory,))
        outsider = Plangate(client, replace(h.settings, identity=mine))
        with pytest.raises(AnswerRefused, match="not an approver of this deployment"):
            await outsider.approve(run_id, 1, card.digest)
        # a proof of erin's, for another step: it does not verify for this one
        forged = api.signed_answer(run_id, 2, card.digest, ApprovalDecision.APPROVE, by="erin")
        with pytest.raises(WorkflowUpdateFailedError) as e:
            await handle.execute_update("approve", forged.model_copy(update={"step": 1}))
        assert "does not verify" in str(e.value.cause)
        for _ in range(100):
            if (await api.report(run_id)).refused_answers:
                break
            await asyncio.sleep(0.05)
        rep = await api.report(run_id)
        assert await credits(pg, aid) == 0 and rep.status == "awaiting_approval"
        (refused,) = rep.refused_answers
        assert "no approver's proof" in refused.why and card.digest not in refused.why
        await api.approve(run_id, 1, card.digest, by="frank")
        rep = await api.result(run_id)
    assert rep.status == "succeeded" and await credits(pg, aid) == 1
    assert rep.approvals[0].answer is not None and rep.approvals[0].answer.by == "frank"


def submitters(*pairs: tuple[SigningKey, tuple[str, ...]]) -> tuple[Submitter, ...]:
    return tuple(Submitter(k.name, k.public, principals) for k, principals in pairs)


async def test_a_submitter_never_approves_its_own_run(client, settings, s3):
    bucket, key = f"trust-{uuid.uuid4().hex[:8]}", "report.txt"
    s3.create_bucket(Bucket=bucket)
    agent = SigningKey.generate("agent")
    worker = replace(settings, policy=replace(
        settings.policy, submitters=submitters((agent, ("dana",))),
        # the agent holds an approver key too: it is still never its own run's approver
        approvers=(*settings.policy.approvers, (agent.name, agent.public)),
    ))
    plan = {"goal": "publish", "on_behalf_of": "dana", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "approval": "required",
         "args": {"bucket": bucket, "key": key, "body": "figures"}},
    ]}
    async with running_worker(client, worker) as h:
        both = Identity(approver_keys=(agent,), submitter_key=agent)
        api = Plangate(client, replace(h.settings, identity=both))
        run_id = await api.start(plan)
        card = await pending_card(api, run_id)
        with pytest.raises(AnswerRefused, match="agent submitted this run: a submitter never"):
            await api.approve(run_id, 1, card.digest)
        assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
        erin = Plangate(client, h.settings)
        await erin.approve(run_id, 1, card.digest, by="erin")
        rep = await erin.result(run_id)
    assert rep.status == "succeeded"
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"figures"


def load_plan(target: str, principal: str | None) -> dict[str, Any]:
    plan: dict[str, Any] = {"goal": f"load {target}", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "analyze", "params": {"table": target}}},
    ]}
    if principal is not None:
        plan["on_behalf_of"] = principal
    return plan


async def table_exists(pg: Any, name: str) -> bool:
    cur = await pg.execute("SELECT to_regclass(%s) IS NOT NULL", (name,))
    return bool((await cur.fetchone())[0])


async def no_run(client: Any, run_id: str) -> bool:
    try:
        await client.get_workflow_handle(run_id).describe()
    except RPCError:
        return True
    return False


async def test_principals_are_bound_to_submitters(client, settings, pg, world):
    agent = SigningKey.generate("agent")
    bound = submitters((agent, ("dana",)))
    tag = uuid.uuid4().hex[:8]
    worker = replace(settings, policy=replace(settings.policy, submitters=bound))
    async with running_worker(client, worker) as h:
        api = Plangate(client, replace(h.settings, identity=replace(h.settings.identity,
                                                                    submitter_key=agent)))
        # refused before any workflow starts: a principal the agent may not use, and none
        for principal, why in (("postgres", "agent may not act as 'postgres'"),
                               (None, "field on_behalf_of: missing")):
            run_id = f"claim-{tag}-{principal}"
            with pytest.raises(PlanError) as e:
                await api.start(load_plan("public.anything", principal), run_id=run_id)
            assert why in str(e.value)
            assert await no_run(client, run_id)
        # the same as raw starts: refused by the worker, nothing scheduled, 403 counted
        plan = parse_plan({**load_plan(f"public.t_{tag}", "postgres"),
                           "steps": [{"n": 1, "tool": "warehouse.load",
                                      "args": {"target": f"public.t_{tag}",
                                               "source": "x.csv"}}]})
        now = datetime.now(UTC)
        stranger = SigningKey.generate("agent")  # the agent's name, not its key
        cases = {
            "a": (None, "carries no submitter's signature"),
            "b": (sign_submission(agent, f"raw-{tag}-b", plan, now),
                  "agent may not act as 'postgres'"),
            "c": (sign_submission(stranger, f"raw-{tag}-c", plan, now), "does not verify"),
            "d": (sign_submission(agent, f"raw-{tag}-other", plan, now), "for another run"),
        }
        for rid, (submission, why) in cases.items():
            run_id = f"raw-{tag}-{rid}"
            rep: RunReport = await ended(await client.start_workflow(
                PlanRunWorkflow.run, RunInput(plan=plan, submission=submission),
                id=run_id, task_queue=h.queue,
            ))
            assert rep.status == "halted", why
            assert rep.failure is not None and rep.failure.code == "not_permitted", why
            assert why in rep.failure.detail, rep.failure.detail
            assert rep.metrics.answers_403 == 1, why
            assert [s.state for s in rep.steps] == ["VOID"], why
            calls = await scheduled(client, run_id)
            assert set(calls) == {"guard.resolve"}, (why, calls)
        assert not await table_exists(pg, f"public.t_{tag}")


async def test_a_run_never_acts_as_a_superuser(client, settings, pg):
    tag = uuid.uuid4().hex[:8]
    target = f"public.super_{tag}"
    await pg.execute(sql.SQL("CREATE TABLE {} (id int)").format(sql.Identifier(f"super_{tag}")))
    async with running_worker(client, settings) as h:
        rep = await h.run(load_plan(target, "postgres"))
    assert rep.status == "halted" and rep.failure is not None
    assert rep.failure.code == "not_permitted" and "superuser" in rep.failure.detail


def remainder_without_approvals(aid: str) -> dict[str, Any]:
    """The failed remainder, every approval dropped (the credit was in the plan all along)."""
    return {"reason": "the same, without the wait", "steps": [
        {"n": 1, "tool": "billing.issue_credit",
         "args": {"account_id": aid, "amount_eur": 99.0}},
    ]}


def failing_then_credit(aid: str, tag: str, approval: bool) -> dict[str, Any]:
    credit_step: dict[str, Any] = {
        "n": 2, "tool": "billing.issue_credit", "depends_on": [1],
        "args": {"account_id": aid, "amount_eur": 99.0},
    }
    if approval:
        credit_step["approval"] = "required"
    return {"goal": f"index, then credit {aid}", "budget": {"replans_max": 1}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",  # the table is not there: fails for good
         "args": {"statement": "create_index",
                  "params": {"name": f"ix_{tag}", "table": f"nowhere_{tag}", "column": "id"}}},
        credit_step,
    ]}


async def test_a_replan_that_drops_the_approval_is_refused(client, settings, pg, world):
    aid, tag = await account(world), uuid.uuid4().hex[:8]
    with FakeOpenAI(responses=[json.dumps(remainder_without_approvals(aid))] * 2) as fake:
        model = model_backed(settings, fake)
        async with running_worker(client, settings, {PROPOSE_ACTIVITY: model.propose}) as h:
            rep = await h.run(failing_then_credit(aid, tag, approval=True))
    assert rep.status == "halted" and rep.plan_version == 1
    (replan,) = rep.replans
    assert not replan.accepted
    assert any("field approval" in p and "may not drop an approval" in p
               for p in replan.problems), replan.problems
    assert await credits(pg, aid) == 0


async def test_a_replanned_money_step_waits_for_a_fresh_card(client, settings, pg, world):
    # no approval anywhere in the plan, none named by the deployment: the model's credit is
    # still a re-planned money step, and waits for a person
    aid, tag = await account(world), uuid.uuid4().hex[:8]
    with FakeOpenAI(responses=[json.dumps(remainder_without_approvals(aid))]) as fake:
        model = model_backed(settings, fake)
        async with running_worker(client, settings, {PROPOSE_ACTIVITY: model.propose}) as h:
            api = Plangate(client, h.settings)
            run_id = await api.start(failing_then_credit(aid, tag, approval=False))
            card = await pending_card(api, run_id, step=1, version=2)
            await asyncio.sleep(0.5)
            assert await credits(pg, aid) == 0
            await api.approve(run_id, 1, card.digest, by="erin")
            rep = await api.result(run_id)
    assert rep.status == "succeeded" and rep.plan_version == 2 and await credits(pg, aid) == 1


async def test_a_raw_start_cannot_carry_state_or_ask_temporal_to_run_it_again(
    client, settings, pg, world
):
    aid = await account(world)
    plan = parse_plan(credit(aid, 500.0))
    # carried state claiming the credit's card approved already: only continue-as-new hands
    # state on, and this run continues from nothing
    forged = RunReport(run_id="forged", goal=plan.goal)
    carried = Carried(report=forged, version=1, begun=False,
                      plan_made_at=datetime.now(UTC), key_tag="0" * 16)
    async with running_worker(client, money_waits(settings)) as h:
        runs: dict[str, RunReport] = {}
        for what, inp, extra in (
            ("carried", RunInput(plan=plan, carried=carried), {}),
            ("retried", RunInput(plan=plan),
             {"retry_policy": RetryPolicy(maximum_attempts=3)}),
        ):
            run_id = f"forged-{what}-{uuid.uuid4().hex[:8]}"
            runs[what] = await ended(await client.start_workflow(
                PlanRunWorkflow.run, inp, id=run_id, task_queue=h.queue,
                result_type=RunReport, **extra,
            ))
            assert set(await scheduled(client, run_id)) <= {"guard.resolve"}, what
    assert "only the run before it can hand on" in str(runs["carried"].failure)
    assert "never scheduled or retried by Temporal" in str(runs["retried"].failure)
    for rep in runs.values():
        assert rep.status == "halted" and rep.failure is not None
        assert rep.failure.code == "not_permitted" and rep.approvals == []
    assert await credits(pg, aid) == 0
