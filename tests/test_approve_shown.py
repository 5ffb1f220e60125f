"""An approver signs what they saw (issue 46): ``plangate approve`` fetches the card from the
run, shows what it signs (stderr; stdout keeps its one receipt line), and refuses, with nothing
signed or sent, a digest the run does not publish for the step and a workflow that is not a
plangate run of this deployment, though it takes an ``approve`` Update. The Python API's
``approve`` refuses the same way. Real worker, real dev server, the impostors' own workers."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from plangate.client.api import AnswerRefused, Plangate
from plangate.records import visibility
from plangate.records.approvals import ApprovalCard, ApprovalRecord
from plangate.records.interface import PLAN_RUN, REPORT_QUERY
from plangate.records.report import RunReport, RunStatus
from plangate.testing import running_worker, scheduled
from tests.test_approvals import bucket, card_of, events, publish, sent, unique

__all__ = ["bucket"]  # the fixture, used by name


class _Taker:
    """Takes any ``approve`` Update and keeps what it got (what an attacker wants signed)."""

    def __init__(self) -> None:
        self.got: list[Any] = []
        self.done = False

    async def wait(self) -> None:
        await workflow.wait_condition(lambda: self.done)

    @workflow.update
    async def approve(self, answer: Any) -> Any:
        self.got.append(answer)
        return {"step": 1, "digest": "0" * 64, "decision": "approve", "at": "2026-01-01T00:00:00Z"}

    @workflow.query
    def answers(self) -> int:
        return len(self.got)


@workflow.defn(name=PLAN_RUN)
class NamedLikePlangate(_Taker):
    """plangate's workflow type, on a task queue of its own."""

    @workflow.run
    async def run(self) -> None:
        await self.wait()


@workflow.defn(name="Payout")
class Payout(_Taker):
    """Another type, with no report query."""

    @workflow.run
    async def run(self) -> None:
        await self.wait()


@workflow.defn(name="TeamAgent")
class Forger(_Taker):
    """Says it is a team's workflow guarded for the deployment, and shows a card (5 EUR) under
    the digest of another (999 EUR to someone else)."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: dict[str, Any] = {}

    @workflow.run
    async def run(self, shown: dict[str, Any]) -> None:
        self.shown = shown
        await self.wait()

    @workflow.query(name=REPORT_QUERY)
    def report(self) -> dict[str, Any]:
        return self.shown


@asynccontextmanager
async def impostor(client: Client, kind: type[_Taker], wf: str = "",
                   *args: Any) -> AsyncIterator[str]:
    queue = unique("elsewhere")
    async with Worker(client, task_queue=queue, workflows=[kind],
                      workflow_runner=UnsandboxedWorkflowRunner()):
        wf = wf or unique("payout")
        run = kind.run  # type: ignore[attr-defined]
        h: WorkflowHandle[Any, Any] = await client.start_workflow(
            run, id=wf, task_queue=queue, args=args)
        # begun (its first workflow task done), as an impostor a person is sent to is: what
        # a refusal says of a workflow no worker has begun differs (``reports._unbegun``)
        for _ in range(200):
            if (await h.describe()).history_length > 3:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"the impostor {wf} never began")
        try:
            yield wf
        finally:
            await h.terminate("test over")


async def test_approve_shows_the_card_it_signs_and_refuses_a_digest_not_published(
    client: Client, settings: Any, stack: Any, s3: Any, bucket: str, monkeypatch: Any,
    capsys: Any,
) -> None:
    from plangate.cli import main

    key = unique("r") + ".txt"
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    plan = publish(bucket, key)
    plan["steps"][0]["args"]["body"] = "figures\x1b]8;;http://evil\x07"
    async with running_worker(client, settings) as h:
        monkeypatch.setenv("PLANGATE_TASK_QUEUE", h.settings.temporal.task_queue)
        api = Plangate(client, h.settings)
        run_id = await api.start(plan)
        card = await card_of(api, run_id)
        before = await events(client, run_id)
        # the digest of a card the run never published (999 EUR to someone else's account)
        forged = hashlib.sha256(b"credit 999 EUR to acct_mallory").hexdigest()
        capsys.readouterr()
        for digest, step in ((forged, 1), (card.digest, 2)):
            argv = ["approve", run_id, "--step", str(step), "--digest", digest, "--as", "erin"]
            assert await asyncio.to_thread(main, argv) == 2
            out, err = capsys.readouterr()
            assert out == "" and err.count("\n") == 1, err
            if step == 1:
                assert err == (
                    f"plangate: approve refused: the digest given is not that of the card step 1 "
                    f"of run '{run_id}' waits on (`plangate status {run_id}` shows the card and "
                    "its digest); nothing signed\n")
                assert card.digest not in err
            else:
                assert err == (f"plangate: approve refused: no card of step 2 waits for an "
                               f"answer on run '{run_id}' (cards wait at step 1); nothing signed\n")
            with pytest.raises(AnswerRefused) as same:
                await api.approve(run_id, step, digest, by="erin")
            assert err == f"plangate: approve refused: {same.value}\n"  # the API's words
        # nothing was sent: no signal, no Update (the run's own bookkeeping, its index row
        # written as its card was published, may add a task and a marker meanwhile)
        assert sent(await events(client, run_id)) == sent(before)
        assert (await scheduled(client, run_id)).get("s3.put", 0) == 0
        right = ["approve", run_id, "--step", "1", "--digest", card.digest, "--as", "erin"]
        assert await asyncio.to_thread(main, right) == 0
        out, err = capsys.readouterr()
        rep = await api.result(run_id)
    # stdout: the one receipt line, as before; stderr: what was signed, escaped
    (line,) = out.splitlines()
    assert line.startswith(f"plangate: step 1 of {run_id}: approve recorded at ")
    shown = err.splitlines()
    assert shown[0] == f"plangate: approve signs this card of run {run_id} (publish the report):"
    assert shown[1] == (
        f"  step 1 of plan version 1: will call s3.put(bucket='{bucket}', key='{key}', "
        "body='figures\\x1b]8;;http://evil\\x07', if_none_match='*') [write]")
    assert shown[2].startswith("  on behalf of dana, policy ")
    assert shown[-1].startswith(f"  digest {card.digest}, expires at "
                                f"{card.expires_at.isoformat()} (in ")
    assert "\x1b" not in err and "\x07" not in err
    assert rep.status == "succeeded" and (await scheduled(client, run_id))["s3.put"] == 1
    assert rep.approvals[0].answer is not None and rep.approvals[0].answer.by == "erin"


@pytest.mark.parametrize("kind", [NamedLikePlangate, Payout])
async def test_a_workflow_that_is_no_plangate_run_of_this_deployment_gets_nothing_signed(
    client: Client, settings: Any, stack: Any, monkeypatch: Any, capsys: Any,
    kind: type[_Taker],
) -> None:
    """A relayed approve line names the attacker's own workflow, which takes any ``approve``
    Update: nothing is signed, nothing reaches it."""
    from plangate.cli import main

    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    queue = f"plangate-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("PLANGATE_TASK_QUEUE", queue)
    digest = hashlib.sha256(b"credit 999 EUR to acct_mallory").hexdigest()
    async with impostor(client, kind) as wf:
        desc = await client.get_workflow_handle(wf).describe()
        argv = ["approve", wf, "--step", "1", "--digest", digest, "--as", "erin"]
        capsys.readouterr()
        assert await asyncio.to_thread(main, argv) == 2
        out, err = capsys.readouterr()
        api = Plangate(client, settings_for(settings, queue))
        with pytest.raises(AnswerRefused) as refused:
            await api.approve(wf, 1, digest, by="erin")
        assert await client.get_workflow_handle(wf).query(kind.answers) == 0
    assert out == ""
    assert err == f"plangate: approve refused: {refused.value}\n"
    if kind is NamedLikePlangate:
        assert str(refused.value) == (
            f"run '{wf}' is not a plangate run of this deployment (task queue {queue}): a "
            f"PlanRun workflow on task queue {desc.task_queue}; nothing signed")
    else:
        assert str(refused.value).startswith(
            f"run '{wf}' is not a plangate run: its Payout workflow does not answer "
            "plangate's report query (")
        assert str(refused.value).endswith("; nothing signed")


def settings_for(settings: Any, queue: str) -> Any:
    from dataclasses import replace

    return replace(settings, temporal=replace(settings.temporal, task_queue=queue))


async def test_a_card_shown_under_another_cards_digest_gets_nothing_signed(
    client: Client, settings: Any, stack: Any, monkeypatch: Any, capsys: Any,
) -> None:
    """A workflow that says it is guarded for this deployment shows a 5 EUR card under the
    digest of a 999 EUR one: the card's content is not its digest's, nothing is signed."""
    from plangate.cli import main

    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    queue = f"plangate-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("PLANGATE_TASK_QUEUE", queue)
    wf = unique("team")
    now = datetime.now(UTC)

    def card(account: str, eur: float) -> ApprovalCard:
        return ApprovalCard(run_id=wf, plan_version=1, step=1, tool="billing.issue_credit",
                            effect="money", args={"account_id": account, "amount_eur": eur},
                            issued_at=now, expires_at=now + timedelta(hours=1))

    small, big = card("acct_dana", 5.0), card("acct_mallory", 999.0)
    shown = RunReport(
        run_id=wf, goal=visibility.guarded_goal("TeamAgent", queue),
        status=RunStatus.AWAITING_APPROVAL,
        approvals=[ApprovalRecord(step=1, plan_version=1, digest=big.digest(),
                                  expires_at=small.expires_at, card=small)])
    async with impostor(client, Forger, wf, shown.model_dump(mode="json")):
        argv = ["approve", wf, "--step", "1", "--digest", big.digest(), "--as", "erin"]
        capsys.readouterr()
        assert await asyncio.to_thread(main, argv) == 2
        out, err = capsys.readouterr()
        assert await client.get_workflow_handle(wf).query(Forger.answers) == 0
    assert out == ""
    assert err == (f"plangate: approve refused: the card run '{wf}' shows for step 1 is not the "
                   "card its digest is of (another run, step or content); nothing signed\n")
