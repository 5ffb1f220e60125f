"""People approve the exact effect: a card (tool, bound arguments, effect, the versions its
probes saw, who the run acts for, expiry) identified by its SHA-256 digest. Answers go through
Temporal Updates whose validators refuse a wrong digest, an expired card, a second answer or
an unknown step, leaving no event in the history; after an approval the step reads the world
again immediately before the call."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from plangate.client.api import AnswerRefused, Plangate, RunEnded
from plangate.plans.model import Effect
from plangate.records.approvals import ApprovalDecision
from plangate.records.report import RunReport
from plangate.testing import running_worker, scheduled


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique("appr")
    s3.create_bucket(Bucket=name)
    return name


def publish(bucket: str, key: str, **step: Any) -> dict[str, Any]:
    return {"goal": "publish the report", "budget": {"replans_max": 0},
            "on_behalf_of": "dana", "steps": [
                {"n": 1, "tool": "s3.put", "approval": "required",
                 "args": {"bucket": bucket, "key": key, "body": "final figures"}, **step},
            ]}


async def until_waiting(api: Plangate, run_id: str, step: int) -> None:
    for _ in range(200):
        if (await api.report(run_id)).step(step).state == "WAITING":
            return
        await asyncio.sleep(0.05)
    rep = await api.report(run_id)
    raise AssertionError(f"step {step} of {run_id} never waited: {rep.status} {rep.failure}")


async def until_refused(api: Plangate, run_id: str, count: int) -> None:
    for _ in range(200):
        if len((await api.report(run_id)).refused_answers) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_id} never recorded {count} refused answers")


async def card_of(api: Plangate, run_id: str, step: int = 1, index: int = -1) -> Any:
    """The card of ``step`` once it waits (10 s at most)."""
    for _ in range(200):
        rep = await api.report(run_id)
        cards = [a for a in rep.approvals if a.step == step]
        if len(cards) > (index if index >= 0 else -index - 1) and cards[index].status == "pending":
            assert rep.status == "awaiting_approval"
            return cards[index]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no card waits for step {step}")


async def events(client: Any, run_id: str) -> Counter[str]:
    out: Counter[str] = Counter()
    async for e in client.get_workflow_handle(run_id).fetch_history_events():
        out[EventType.Name(e.event_type)] += 1
    return out



# what an answer sends a run: a signal, or an Update (a refused one leaves no event)
SENT = ("EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED", "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED",
        "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED",
        "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED")


def sent(counts: Counter[str]) -> dict[str, int]:
    return {k: counts[k] for k in SENT}


async def test_the_right_digest_runs_the_step_once(client, settings, s3, bucket):
    key = unique("r") + ".txt"
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(publish(bucket, key))
        card = await card_of(api, run_id)
        assert (await scheduled(client, run_id)).get("s3.put", 0) == 0  # nothing yet
        assert card.card.args == {"bucket": bucket, "key": key, "body": "final figures",
                                  "if_none_match": "*"}  # the version the write will carry
        assert card.card.on_behalf_of == "dana" and card.card.effect == "write"
        assert card.digest == card.card.digest() and len(card.digest) == 64
        receipt = await api.approve(run_id, 1, card.digest, by="erin")
        rep = await api.result(run_id)
    assert receipt.decision == "approve" and rep.status == "succeeded"
    assert (await scheduled(client, run_id))["s3.put"] == 1
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"final figures"
    (record,) = rep.approvals
    assert record.status == "approved" and record.answer is not None
    assert record.answer.by == "erin"
    phases = [c.phase for c in rep.step(1).checks]
    assert phases[:2] == ["skip+pre", "re-probe"]  # read again right before the call
    assert rep.metrics.approval_wait_ms.count == 1
    assert (await events(client, run_id))["EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED"] == 1


async def test_refused_answers_leave_no_event_and_run_nothing(client, settings, s3, bucket):
    key, signal = unique("r") + ".txt", unique("signal") + ".txt"
    plan = publish(bucket, key)
    # a step after the approved one that waits for the world: the run is still going when the
    # second answer arrives, whatever the machine's speed
    plan["steps"].append({
        "n": 2, "tool": "s3.put", "depends_on": [1],
        "args": {"bucket": bucket, "key": unique("notice") + ".txt", "body": "published"},
        "post": [{"probe": "object_exists", "bucket": bucket, "key": signal,
                  "wait": {"timeout_s": 60, "interval_s": 1}}],
    })
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(plan)
        card = await card_of(api, run_id)
        before = await events(client, run_id)
        refusals = {
            "wrong digest": api.approve(run_id, 1, "0" * 64),
            "unknown step": api.approve(run_id, 9, card.digest),
            "no reason": api.reject(run_id, 1, card.digest, reason=" "),
        }
        for what, call in refusals.items():
            with pytest.raises(AnswerRefused) as e:
                await call
            assert str(e.value), what
        # no signal and no Update for any of them (the run's own bookkeeping, its index row
        # written as its card was published, may add a task and a marker meanwhile)
        assert sent(await events(client, run_id)) == sent(before)
        assert (await scheduled(client, run_id)).get("s3.put", 0) == 0
        await api.approve(run_id, 1, card.digest, by="erin")
        await until_waiting(api, run_id, 2)
        with pytest.raises(AnswerRefused, match="no longer waiting"):
            await api.approve(run_id, 1, card.digest, by="frank")  # a second answer
        s3.put_object(Bucket=bucket, Key=signal, Body=b"go")
        rep = await api.result(run_id)
    # one call for the approved step, one for the step after it
    assert rep.status == "succeeded" and (await scheduled(client, run_id))["s3.put"] == 2
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"final figures"
    assert rep.approvals[0].answer is not None and rep.approvals[0].answer.by == "erin"


async def test_an_update_failure_that_is_no_refusal_is_not_called_one(client, settings, s3,
                                                                      bucket):
    """An answer is refused by the type of the Update's failure, never its message: one sent
    to an Update the workflow does not define (a worker of another version) fails with a
    RuntimeError, which is raised as it is, not as ``AnswerRefused``; the card still waits."""
    from temporalio.client import WorkflowUpdateFailedError
    from temporalio.exceptions import ApplicationError

    from plangate.client import answers

    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(publish(bucket, unique("r") + ".txt"))
        card = await card_of(api, run_id)
        answer = api.signed_answer(run_id, 1, card.digest, ApprovalDecision.APPROVE, by="erin")
        with pytest.raises(WorkflowUpdateFailedError) as e:
            await answers.answer(client, h.settings, run_id, "approve-v9", answer)
        assert not isinstance(e.value, AnswerRefused)
        assert isinstance(e.value.cause, ApplicationError)
        assert e.value.cause.type == "RuntimeError"
        (record,) = (await api.report(run_id)).approvals
        assert record.status == "pending" and record.answer is None
        assert (await scheduled(client, run_id)).get("s3.put", 0) == 0
        # the same answer by the Update the workflow defines: taken
        await api.approve(run_id, 1, card.digest, by="erin")
        rep = await api.result(run_id)
    assert rep.status == "succeeded" and rep.approvals[0].answer is not None
    assert (await events(client, run_id))["EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED"] == 1


async def test_an_expired_card_is_refused_and_the_step_follows_on_unmet(client, settings, s3,
                                                                         bucket):
    key = unique("r") + ".txt"
    plan = publish(bucket, key, on_unmet="halt")
    plan["approval_ttl_s"] = 1
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(plan)
        card = await card_of(api, run_id)
        rep: RunReport = await api.result(run_id)  # nobody answers within the second
        with pytest.raises(RunEnded, match="has ended"):
            await api.approve(run_id, 1, card.digest)
    assert rep.status == "halted" and rep.approvals[0].status == "expired"
    assert rep.failure is not None and rep.failure.code == "approval_expired"
    assert (await scheduled(client, run_id)).get("s3.put", 0) == 0
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


async def test_a_rejected_card_follows_on_unmet(client, settings, s3, bucket):
    key = unique("r") + ".txt"
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        halt = await api.start(publish(bucket, key, on_unmet="halt"))
        await api.reject(halt, 1, (await card_of(api, halt)).digest, reason="wrong figures",
                         by="erin")
        halted = await api.result(halt)
        replan = await api.start({**publish(bucket, key), "budget": {"replans_max": 1}})
        await api.reject(replan, 1, (await card_of(api, replan)).digest, reason="not today")
        replanned = await api.result(replan)
    assert halted.status == "halted" and halted.failure is not None
    assert halted.failure.code == "approval_rejected" and "wrong figures" in halted.failure.detail
    # on_unmet replan: the re-planner is asked (the playbook has no recipe: the run halts)
    assert replanned.replans_used == 1 and replanned.failure is not None
    assert replanned.failure.code == "approval_rejected"
    for run_id in (halt, replan):
        assert (await scheduled(client, run_id)).get("s3.put", 0) == 0
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


async def test_the_object_deleted_while_the_card_waits_is_caught_by_the_re_probe(
    client, settings, s3, bucket
):
    source, key = unique("src") + ".csv", unique("r") + ".txt"
    s3.put_object(Bucket=bucket, Key=source, Body=b"id\n1\n")
    plan = publish(bucket, key, on_unmet="halt",
                   pre=[{"probe": "object_exists", "bucket": bucket, "key": source}])
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(plan)
        card = await card_of(api, run_id)
        s3.delete_object(Bucket=bucket, Key=source)  # the lifecycle rule fires while we wait
        await api.approve(run_id, 1, card.digest, by="erin")
        rep = await api.result(run_id)
    assert rep.status == "halted"
    assert rep.failure is not None and rep.failure.code == "precondition_unmet"
    assert source in rep.failure.detail
    assert (await scheduled(client, run_id)).get("s3.put", 0) == 0  # never called


async def test_a_moved_version_after_approval_gets_a_new_card(client, settings, s3, bucket):
    key = unique("r") + ".txt"
    s3.put_object(Bucket=bucket, Key=key, Body=b"v1")
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(publish(bucket, key))
        first = await card_of(api, run_id)
        etag1 = s3.head_object(Bucket=bucket, Key=key)["ETag"]
        assert first.card.args["if_match"] == etag1
        s3.put_object(Bucket=bucket, Key=key, Body=b"v2 by someone else")
        await api.approve(run_id, 1, first.digest, by="erin")
        second = await card_of(api, run_id, index=1)  # the world moved: a new card
        etag2 = s3.head_object(Bucket=bucket, Key=key)["ETag"]
        assert second.card.args["if_match"] == etag2 and second.digest != first.digest
        await api.approve(run_id, 1, second.digest, by="erin")
        rep = await api.result(run_id)
    assert [a.status for a in rep.approvals] == ["superseded", "approved"]
    assert rep.status == "succeeded" and (await scheduled(client, run_id))["s3.put"] == 1
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"final figures"


async def test_a_signal_answer_gets_the_same_checks(client, settings, s3, bucket):
    key = unique("r") + ".txt"
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(publish(bucket, key))
        card = await card_of(api, run_id)
        handle = api.handle(run_id)
        from plangate.records.approvals import ApprovalAnswer

        await handle.signal("answer", ApprovalAnswer(step=1, digest="f" * 64, by="mallory"))
        # the right digest, claiming a name, proving nothing
        await handle.signal("answer", ApprovalAnswer(step=1, digest=card.digest, by="erin"))
        await until_refused(api, run_id, 2)
        assert (await scheduled(client, run_id)).get("s3.put", 0) == 0
        signed = api.signed_answer(run_id, 1, card.digest, ApprovalDecision.APPROVE, by="erin")
        await handle.signal("answer", signed)
        rep = await api.result(run_id)
    assert rep.status == "succeeded" and (await scheduled(client, run_id))["s3.put"] == 1
    wrong, unproven = rep.refused_answers
    assert wrong.answer.by == "mallory" and "wrong digest" in wrong.why
    assert card.digest not in wrong.why  # a refusal never shows the card's digest
    assert unproven.answer.by == "erin" and "no approver's proof" in unproven.why
    assert rep.approvals[0].answer is not None and rep.approvals[0].answer.by == "erin"
    assert rep.approvals[0].answer.proof is not None


async def test_a_deployment_names_the_effects_that_wait_for_a_person(client, settings, s3,
                                                                     bucket):
    key = unique("r") + ".txt"
    plan = publish(bucket, key)
    del plan["steps"][0]["approval"]
    narrow = replace(settings, policy=replace(settings.policy, approve_effects=(Effect.WRITE,)))
    async with running_worker(client, narrow) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(plan)
        card = await card_of(api, run_id)
        await api.approve(run_id, 1, card.digest)
        rep = await api.result(run_id)
    assert rep.status == "succeeded" and len(rep.approvals) == 1


async def test_the_cli_shows_the_card_and_answers_it(client, settings, stack, s3, bucket,
                                                     monkeypatch, capsys):
    from plangate.cli import main

    key = unique("r") + ".txt"
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    async with running_worker(client, settings) as h:
        monkeypatch.setenv("PLANGATE_TASK_QUEUE", h.settings.temporal.task_queue)
        api = Plangate(client, h.settings)
        run_id = await api.start(publish(bucket, key))
        card = await card_of(api, run_id)
        capsys.readouterr()
        assert await asyncio.to_thread(main, ["status", run_id]) == 1  # not succeeded (yet)
        shown = capsys.readouterr().out
        assert f"will call s3.put(bucket='{bucket}', key='{key}'" in shown
        assert f"plangate approve {run_id} --step 1 --digest {card.digest}" in shown
        assert "expires in" in shown and "on behalf of dana" in shown
        wrong = ["approve", run_id, "--step", "1", "--digest", "a" * 64, "--as", "erin"]
        assert await asyncio.to_thread(main, wrong) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("plangate: approve refused: the digest given is not that of the "
                              "card step 1") and "\n" not in err
        right = ["approve", run_id, "--step", "1", "--digest", card.digest, "--as", "erin"]
        assert await asyncio.to_thread(main, right) == 0
        rep = await api.result(run_id)
    assert rep.status == "succeeded" and (await scheduled(client, run_id))["s3.put"] == 1
