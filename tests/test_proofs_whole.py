"""A proof covers the whole answer (issue 34): the reason recorded is the one its approver
signed (a rejection's and an approval's alike), a time without a time zone is refused (an
answer's or a submission's: ``not_permitted``, never a crash), and a key the deployment no
longer lists neither approves nor rejects a run that waits. Each refused answer is judged by
what the run recorded: no answer on its card, no successful Update in its history, nothing
written in S3; a refused submission acts on nothing."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowUpdateFailedError

from plangate.client.api import AnswerRefused, Plangate
from plangate.plans.load import parse_plan
from plangate.records.approvals import ApprovalDecision
from plangate.records.proofs import Submitter, sign_submission
from plangate.records.report import RunReport
from plangate.records.run import RunInput
from plangate.records.signing import SigningKey
from plangate.testing import ended, history_events, running_worker, scheduled
from plangate.workflows.plan_run import PlanRunWorkflow


def publish(bucket: str, key: str) -> dict[str, Any]:
    return {"goal": "publish the figures", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "approval": "required",
         "args": {"bucket": bucket, "key": key, "body": "final figures"}},
    ]}


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"proofs-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    return name


async def pending_card(api: Plangate, run_id: str) -> Any:
    for _ in range(300):
        rep = await api.report(run_id)
        waiting = [a for a in rep.approvals if a.status == "pending"]
        if waiting:
            return waiting[0]
        assert not rep.status.final, (rep.status, rep.failure)
        await asyncio.sleep(0.05)
    raise AssertionError(f"no card waits in {run_id}")


async def updates(client: Any, run_id: str) -> Counter[str]:
    """The run's Update events: accepted, completed with success, completed with a failure."""
    out: Counter[str] = Counter()
    for e in await history_events(client, run_id):
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            out["accepted"] += 1
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            outcome = e.workflow_execution_update_completed_event_attributes.outcome
            out["succeeded" if outcome.HasField("success") else "failed"] += 1
    return out


async def unanswered(api: Plangate, run_id: str, digest: str) -> RunReport:
    rep = await api.report(run_id)
    (record,) = rep.approvals
    assert (record.digest, record.status, record.answer) == (digest, "pending", None)
    assert rep.status == "awaiting_approval"
    return rep


async def test_the_reason_recorded_is_the_signed_one_and_a_time_has_a_zone(
    client, settings, s3, bucket
):
    key = "figures.txt"
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(publish(bucket, key))
        card = await pending_card(api, run_id)
        handle = api.handle(run_id)
        # erin's approval (its reason signed empty), sent with a reason she never signed
        signed = api.signed_answer(run_id, 1, card.digest, ApprovalDecision.APPROVE, by="erin")
        unsigned = signed.model_copy(update={"reason": "the CFO said so"})
        # her rejection, its signed reason swapped
        rejection = api.signed_answer(run_id, 1, card.digest, ApprovalDecision.REJECT, "stale",
                                      by="erin")
        swapped = rejection.model_copy(update={"reason": "fraud suspected"})
        # an approval signed at a time without a time zone (a correct signature over it)
        naive = api.signed_answer(run_id, 1, card.digest, ApprovalDecision.APPROVE, by="erin",
                                  at=datetime.now(UTC).replace(tzinfo=None))
        refused = {
            "approve-unsigned": ("approve", unsigned, "the proof of erin does not verify"),
            "reject-swapped": ("reject", swapped, "the proof of erin does not verify"),
            "approve-naive": ("approve", naive,
                              "the proof of erin is signed at a time without a time zone"),
        }
        for what, (update, answer, why) in refused.items():
            with pytest.raises(WorkflowUpdateFailedError) as e:
                await handle.execute_update(update, answer)
            assert why in str(e.value.cause), (what, str(e.value.cause))
        await unanswered(api, run_id, card.digest)
        assert await updates(client, run_id) == Counter()  # refused by the validator
        assert (await scheduled(client, run_id)).get("s3.put", 0) == 0
        # an approval with a reason its approver signed: recorded as signed, and the tool's
        # activity verifies the same proof over it before it writes
        reasoned = api.signed_answer(run_id, 1, card.digest, ApprovalDecision.APPROVE,
                                     "checked against the ledger", by="frank")
        await handle.execute_update("approve", reasoned)
        rep = await api.result(run_id)
    assert rep.status == "succeeded", rep.failure
    (record,) = rep.approvals
    assert record.answer is not None
    assert (record.answer.by, record.answer.reason) == ("frank", "checked against the ledger")
    assert (await scheduled(client, run_id))["s3.put"] == 1
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"final figures"


async def test_a_submission_time_without_a_zone_is_not_permitted(client, settings, s3, bucket):
    agent = SigningKey.generate("agent")
    worker = replace(settings, policy=replace(
        settings.policy, submitters=(Submitter(agent.name, agent.public, ("dana",)),),
    ))
    key = "naive.txt"
    plan = parse_plan({**publish(bucket, key), "on_behalf_of": "dana"})
    run_id = f"naive-{uuid.uuid4().hex[:8]}"
    naive = sign_submission(agent, run_id, plan, datetime.now(UTC).replace(tzinfo=None))
    async with running_worker(client, worker) as h:
        rep: RunReport = await ended(await client.start_workflow(
            PlanRunWorkflow.run, RunInput(plan=plan, submission=naive), id=run_id,
            task_queue=h.queue,
        ))
    assert rep.status == "halted"
    assert rep.failure is not None and rep.failure.code == "not_permitted"
    assert rep.failure.detail == "the submission of agent is signed at a time without a time zone"
    assert [s.state for s in rep.steps] == ["VOID"] and rep.approvals == []
    assert set(await scheduled(client, run_id)) == {"guard.resolve"}
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


async def test_a_revoked_approver_neither_approves_nor_rejects(client, settings, s3, bucket):
    key = "revoked.txt"
    async with running_worker(client, settings) as before:
        api = Plangate(client, before.settings)
        run_id = await api.start(publish(bucket, key))
        card = await pending_card(api, run_id)
    # the deployment removes frank from PLANGATE_APPROVERS; its worker restarts with the list
    # while the run waits (the run's guards, derived before, still name him)
    listed = tuple(a for a in settings.policy.approvers if a[0] != "frank")
    revoked = replace(settings, policy=replace(settings.policy, approvers=listed))
    why = "'frank' is not an approver of this deployment (PLANGATE_APPROVERS)"
    async with running_worker(client, revoked, queue=before.settings.temporal.task_queue) as h:
        # frank's client still holds his key
        frank = Plangate(client, h.settings)
        with pytest.raises(AnswerRefused) as e:
            await frank.approve(run_id, 1, card.digest, by="frank")
        assert str(e.value) == why
        await unanswered(api, run_id, card.digest)
        # accepted by the validator (the guards' list), refused where it would be recorded
        assert await updates(client, run_id) == Counter(accepted=1, failed=1)
        with pytest.raises(AnswerRefused) as e:  # nor can he halt the run
            await frank.reject(run_id, 1, card.digest, reason="stop", by="frank")
        assert str(e.value) == why
        # by signal: the same checks; refused, and recorded as refused only
        await frank.handle(run_id).signal("answer", frank.signed_answer(
            run_id, 1, card.digest, ApprovalDecision.REJECT, "stop", by="frank"))
        for _ in range(200):
            if (await api.report(run_id)).refused_answers:
                break
            await asyncio.sleep(0.05)
        rep = await unanswered(api, run_id, card.digest)
        assert [r.why for r in rep.refused_answers] == [why]
        # the second Update never passed the validator, which now knows the current list
        assert await updates(client, run_id) == Counter(accepted=1, failed=1)
        assert (await scheduled(client, run_id)).get("s3.put", 0) == 0
        await api.approve(run_id, 1, card.digest, by="erin")
        rep = await api.result(run_id)
    assert rep.status == "succeeded", rep.failure
    (record,) = rep.approvals
    assert record.answer is not None and record.answer.by == "erin"
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"final figures"
    assert await updates(client, run_id) == Counter(accepted=2, failed=1, succeeded=1)
