"""plangate.temporal on a team's own worker: the example project (examples/temporal_team), its
activities unchanged, guarded by adding the plugin and its guard table. Real Temporal, Postgres
and S3; what is asserted is in the world (rows, objects) and in the workflow's history."""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from credits import activities as team
from credits.workflows import (
    ArchiveWorkflow,
    CarefulArchiveWorkflow,
    CountWorkflow,
    CreditWorkflow,
)
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker

from plangate.client.api import Plangate
from plangate.records import keys
from plangate.temporal import GuardTable, PlangatePlugin
from plangate.testing import scheduled
from plangate.world.settings import Settings
from tests.temporal_team import EXAMPLE, bucket, team_env

__all__ = ["bucket", "team_env"]  # the fixtures, shared by the plangate.temporal tests

ACTIVITIES: list[Callable[..., Any]] = [
    team.issue_credit, team.find_credit, team.load_export, team.archive_object, team.count_rows,
]
WORKFLOWS = [ArchiveWorkflow, CarefulArchiveWorkflow, CreditWorkflow, CountWorkflow]


@pytest_asyncio.fixture(loop_scope="session")
async def team_client(settings: Settings, team_env: None) -> Client:
    """The team's own client: its address, its converter (pydantic), plangate's plugin."""
    await team.ensure_schema()
    return await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace,
                                data_converter=pydantic_data_converter)


def plugin(settings: Settings, **kw: Any) -> PlangatePlugin:
    return PlangatePlugin(EXAMPLE / "guards.yaml", settings=settings, principal="support-agent",
                          **kw)


async def _worker(client: Client, settings: Settings, queue: str, **kw: Any) -> Worker:
    return Worker(client, task_queue=queue, workflows=WORKFLOWS, activities=ACTIVITIES,
                  plugins=[plugin(settings, **kw)])


@pytest_asyncio.fixture(loop_scope="session")
async def team_worker(team_client: Client, settings: Settings) -> AsyncIterator[str]:
    queue = f"team-{uuid.uuid4().hex[:8]}"
    async with await _worker(team_client, settings, queue):
        yield queue


async def credits_of(pg: psycopg.AsyncConnection[Any], account: str) -> int:
    cur = await pg.execute("SELECT count(*) FROM team.credits WHERE account_id = %s", (account,))
    row = await cur.fetchone()
    return int(row[0]) if row else 0


@pytest.mark.asyncio(loop_scope="session")
async def test_unmet_pre_condition_the_activity_never_runs(
    team_client: Client, team_worker: str, bucket: str, s3: Any, client: Client,
    settings: Settings,
) -> None:
    wf = f"archive-{uuid.uuid4().hex[:8]}"
    before = team.CALLS["archive_object"]
    with pytest.raises(WorkflowFailureError) as caught:
        await team_client.execute_workflow(
            ArchiveWorkflow.run, args=[bucket, "missing.csv"], id=wf, task_queue=team_worker,
            execution_timeout=timedelta(seconds=60))
    err = caught.value.cause
    # read at the call, the instant before the activity would act: refused there (412), the
    # workflow failed with plangate's code, the activity's own failure (the SDK's) its cause
    assert isinstance(err, ApplicationError) and err.type == "precondition_failed"
    assert "not called: at the call, object_exists" in err.message
    cause = err.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError)
    assert cause.cause.type == "precondition_failed" and cause.scheduled_event_id > 0
    assert team.CALLS["archive_object"] == before
    ran = await scheduled(team_client, wf)
    assert ran["plangate.guard.check"] == 1
    keys = s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0)
    assert keys == 0
    rep = await Plangate(client, settings).report(wf)
    (step,) = rep.steps
    assert [c.phase.value for c in step.checks] == ["at-call"]
    assert step.checks[0].results[0].outcome.value == "violated"
    assert [(r.status, r.code) for r in step.refusals] == [(412, "precondition_failed")]

    # the object there: the same workflow archives it
    s3.put_object(Bucket=bucket, Key="there.csv", Body=b"a,b\n")
    done = await team_client.execute_workflow(
        ArchiveWorkflow.run, args=[bucket, "there.csv"], id=f"{wf}-2", task_queue=team_worker,
        execution_timeout=timedelta(seconds=60))
    assert done == "archive/there.csv"
    assert s3.get_object(Bucket=bucket, Key="archive/there.csv")["Body"].read() == b"a,b\n"


@pytest.mark.asyncio(loop_scope="session")
async def test_a_money_call_waits_for_a_card_and_credits_once(
    team_client: Client, team_worker: str, client: Client, settings: Settings,
    pg: psycopg.AsyncConnection[Any],
) -> None:
    account = f"acct-{uuid.uuid4().hex[:8]}"
    wf = f"credit-{uuid.uuid4().hex[:8]}"
    handle = await team_client.start_workflow(
        CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=2500),
        id=wf, task_queue=team_worker, execution_timeout=timedelta(seconds=120))
    api = Plangate(client, settings)
    card = await api.wait_for_card(wf, timeout=60)
    assert card.card.tool == "issue_credit"
    assert card.card.args == {"account_id": account, "amount_cents": 2500, "reason": ""}
    assert await credits_of(pg, account) == 0
    await api.approve(wf, card.step, card.digest)
    result = await handle.result()
    assert result.account_id == account and result.amount_cents == 2500
    assert await credits_of(pg, account) == 1
    rep = await api.report(wf)
    assert rep.steps[0].tool == "issue_credit" and rep.steps[0].state.value == "DONE"
    assert [c.phase.value for c in rep.steps[0].checks] == ["post"]


@pytest.mark.asyncio(loop_scope="session")
async def test_without_the_workflow_guard_the_call_is_refused_at_the_call(
    team_client: Client, settings: Settings, pg: psycopg.AsyncConnection[Any],
) -> None:
    queue = f"team-bare-{uuid.uuid4().hex[:8]}"
    account = f"acct-{uuid.uuid4().hex[:8]}"
    before = team.CALLS["issue_credit"]
    async with await _worker(team_client, settings, queue, workflow_guard=False):
        with pytest.raises(WorkflowFailureError) as caught:
            await team_client.execute_workflow(
                CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=100),
                id=f"bare-{uuid.uuid4().hex[:8]}", task_queue=queue,
                execution_timeout=timedelta(seconds=60))
    cause = caught.value.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError)
    assert cause.cause.type == "not_permitted"
    assert cause.cause.details and cause.cause.details[0]["status"] == 403
    assert team.CALLS["issue_credit"] == before
    assert await credits_of(pg, account) == 0


@pytest.mark.asyncio(loop_scope="session")
async def test_the_team_keeps_its_converter_and_unguarded_activities_pass(
    team_client: Client, team_worker: str,
) -> None:
    guarded = await Client.connect(
        team_client.service_client.config.target_host, namespace=team_client.namespace,
        data_converter=pydantic_data_converter, plugins=[PlangatePlugin({})])
    assert guarded.data_converter is pydantic_data_converter
    wf = f"count-{uuid.uuid4().hex[:8]}"
    assert await team_client.execute_workflow(
        CountWorkflow.run, 7, id=wf, task_queue=team_worker,
        execution_timeout=timedelta(seconds=60)) == 7
    ran = await scheduled(team_client, wf)
    assert ran == {"count_rows": 1}


async def _eventually(check: Any, within: float = 60.0) -> Any:
    """Visibility is eventually consistent: ask again until ``check`` answers (bounded)."""
    import asyncio

    deadline = asyncio.get_running_loop().time() + within
    while True:
        found = await check()
        if found or asyncio.get_running_loop().time() > deadline:
            return found
        await asyncio.sleep(0.25)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_guarded_run_is_seen_and_cancelled_like_a_plangate_run(
    team_client: Client, team_worker: str, client: Client, settings: Settings,
    pg: psycopg.AsyncConnection[Any],
) -> None:
    account = f"acct-{uuid.uuid4().hex[:8]}"
    wf = f"credit-{uuid.uuid4().hex[:8]}"
    handle = await team_client.start_workflow(
        CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=900),
        id=wf, task_queue=team_worker, execution_timeout=timedelta(seconds=120))
    api = Plangate(client, settings)
    card = await api.wait_for_card(wf, timeout=60)

    async def pending() -> list[Any]:
        return [c for c in (await api.pending_approvals()).cards if c.run_id == wf]

    (listed,) = await _eventually(pending)
    assert listed.record.digest == card.digest and listed.record.card.tool == "issue_credit"

    async def waiting() -> list[Any]:
        return [r for r in await api.runs() if r.run_id == wf
                and r.status == "awaiting_approval"]

    assert await _eventually(waiting), "the guarded run is not listed as awaiting approval"

    await api.cancel(wf, reason="wrong account", requester="erin")
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    assert isinstance(caught.value.cause, ApplicationError)
    assert caught.value.cause.type == "cancelled" and "wrong account" in str(caught.value.cause)
    assert await credits_of(pg, account) == 0
    ran = await scheduled(team_client, wf)
    assert ran["issue_credit"] == 0
    rep = await api.report(wf)
    assert rep.cancellation is not None and rep.cancellation.reason == "wrong account"
    assert rep.status.value == "cancelled"

    async def cancelled() -> list[Any]:
        return [r for r in await api.runs() if r.run_id == wf and r.status == "cancelled"]

    assert await _eventually(cancelled), "the cancelled run is not listed as cancelled"


@pytest.mark.asyncio(loop_scope="session")
async def test_the_cli_approves_and_shows_a_guarded_run(
    team_client: Client, team_worker: str, client: Client, settings: Settings, stack: Any,
    pg: psycopg.AsyncConnection[Any],
) -> None:
    import asyncio
    import json
    import os
    import subprocess

    account = f"acct-{uuid.uuid4().hex[:8]}"
    wf = f"credit-{uuid.uuid4().hex[:8]}"
    handle = await team_client.start_workflow(
        CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=1200),
        id=wf, task_queue=team_worker, execution_timeout=timedelta(seconds=120))
    card = await Plangate(client, settings).wait_for_card(wf, timeout=60)
    env = {**os.environ, **stack.env()}

    async def cli(*argv: str, queue: str | None = None) -> subprocess.CompletedProcess[str]:
        own = env if queue is None else {**env, "PLANGATE_TASK_QUEUE": queue}
        return await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "plangate", *argv], capture_output=True,
            text=True, env=own, timeout=120)

    approved = await cli("approve", wf, "--step", str(card.step), "--digest", card.digest)
    assert approved.returncode == 0, approved.stderr
    await handle.result()
    assert await credits_of(pg, account) == 1
    shown = await cli("status", wf, "--json")
    assert shown.returncode == 0, shown.stderr
    rep = json.loads(shown.stdout)
    (step,) = rep["steps"]
    assert (step["tool"], step["state"], step["effect"]) == ("issue_credit", "DONE", "money")
    assert keys.of_workflow(step["ledger"]["key"], wf)
    assert [c["phase"] for c in step["checks"]] == ["post"]
    assert step["checks"][0]["results"][0]["outcome"] == "holds"
    ledger = await cli("ledger", wf, "--json")
    assert ledger.returncode == 0, ledger.stderr
    (row,) = json.loads(ledger.stdout)
    assert (row["tool"], row["state"], row["effect"]) == ("issue_credit", "done", "money")
    assert row["idempotency_key"] == step["ledger"]["key"]
    # the example's 1200 cents (amount_unit: cents): 12.00 in the ledger, never 1200 (issue 48)
    assert (row["approver"], row["principal"], row["amount"]) == ("erin", "support-agent", "12.00")

    async def staleness() -> list[Any]:
        out = await cli("report", "--since", "1h", "--json")
        assert out.returncode == 0, out.stderr
        return [t for t in json.loads(out.stdout)["tools"] if t["tool"] == "issue_credit"]

    assert await _eventually(staleness), "the staleness report does not count issue_credit"
    listed = await cli("runs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert wf in {r["run_id"] for r in json.loads(listed.stdout)}
    # another deployment in the namespace (a task queue of its own) neither counts nor lists it
    queue = f"elsewhere-{uuid.uuid4().hex[:8]}"
    elsewhere = await cli("report", "--since", "1h", "--json", queue=queue)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert json.loads(elsewhere.stdout)["runs"] == 0
    listed = await cli("runs", "--json", queue=queue)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []


@pytest.mark.asyncio(loop_scope="session")
async def test_the_deployments_policy_forbids_a_guarded_call(
    team_client: Client, client: Client, settings: Settings, pg: psycopg.AsyncConnection[Any],
    tmp_path: Path,
) -> None:
    from dataclasses import replace

    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "base.cedar").write_text('@id("base")\npermit(principal, action, resource);\n')
    (directory / "cap.cedar").write_text(
        '@id("team-credit-cap")\nforbid(principal, action == Plangate::Action::"money", '
        'resource)\nwhen { resource.tool == "issue_credit" && context.amount_cents > 1000 };\n')
    strict = replace(settings, policy=replace(settings.policy, policies=directory))
    queue = f"team-policy-{uuid.uuid4().hex[:8]}"
    account = f"acct-{uuid.uuid4().hex[:8]}"
    wf = f"credit-{uuid.uuid4().hex[:8]}"
    under = f"credit-{uuid.uuid4().hex[:8]}"
    async with await _worker(team_client, strict, queue):
        # 900 cents is under the cap of 1000 cents: the policy sees 900, not 90000 (issue 48),
        # and the credit goes on to its card
        waits = await team_client.start_workflow(
            CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=900),
            id=under, task_queue=queue, execution_timeout=timedelta(seconds=60))
        try:
            card = await Plangate(client, strict).wait_for_card(under, timeout=60)
            assert card.card.args["amount_cents"] == 900
        finally:
            await waits.terminate("the card was the point")
        with pytest.raises(WorkflowFailureError) as caught:
            await team_client.execute_workflow(
                CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=1200),
                id=wf, task_queue=queue, execution_timeout=timedelta(seconds=60))
    err = caught.value.cause
    assert isinstance(err, ApplicationError)
    assert err.type == "policy_denied" and "team-credit-cap" in err.message
    assert (await scheduled(team_client, wf))["issue_credit"] == 0
    assert await credits_of(pg, account) == 0
    cur = await pg.execute(
        "SELECT outcome, policies FROM plangate.policy_decisions WHERE run_id = %s", (wf,))
    assert [(o, list(p)) for o, p in await cur.fetchall()] == [("forbid", ["team-credit-cap"])]


@pytest.mark.asyncio(loop_scope="session")
async def test_a_forged_guard_header_does_not_pass_the_call(
    team_client: Client, settings: Settings, pg: psycopg.AsyncConnection[Any],
) -> None:
    """A workflow of someone else's that sends the guard's header itself (a key of its own, no
    approval): the header carries no seal of the deployment, so the activity refuses the call
    before deciding anything (403 ``not_permitted``)."""
    from temporalio.worker import (
        Interceptor,
        StartActivityInput,
        WorkflowInboundInterceptor,
        WorkflowInterceptorClassInput,
        WorkflowOutboundInterceptor,
    )

    from plangate.temporal.calls import HEADER, GuardHeader, header_payload

    class Forge(WorkflowOutboundInterceptor):
        def start_activity(self, input: StartActivityInput) -> Any:
            from temporalio import workflow

            from plangate.records import keys

            key = keys.idempotency_key(workflow.info().workflow_id, "forged", "g/1")
            forged = {**input.headers, HEADER: header_payload(GuardHeader(n=1, key=key))}
            return super().start_activity(replace_input(input, forged))

    class ForgeInbound(WorkflowInboundInterceptor):
        def init(self, outbound: WorkflowOutboundInterceptor) -> None:
            super().init(Forge(outbound))

    class Forger(Interceptor):
        def workflow_interceptor_class(
            self, input: WorkflowInterceptorClassInput
        ) -> type[WorkflowInboundInterceptor]:
            return ForgeInbound

    queue = f"team-forged-{uuid.uuid4().hex[:8]}"
    account = f"acct-{uuid.uuid4().hex[:8]}"
    before = team.CALLS["issue_credit"]
    worker = Worker(team_client, task_queue=queue, workflows=WORKFLOWS, activities=ACTIVITIES,
                    interceptors=[Forger()],
                    plugins=[plugin(settings, workflow_guard=False)])
    async with worker:
        with pytest.raises(WorkflowFailureError) as caught:
            await team_client.execute_workflow(
                CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=100),
                id=f"forged-{uuid.uuid4().hex[:8]}", task_queue=queue,
                execution_timeout=timedelta(seconds=60))
    cause = caught.value.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError)
    assert cause.cause.type == "not_permitted"
    assert "carries no seal of this deployment" in cause.cause.message
    assert cause.cause.details and cause.cause.details[0]["status"] == 403
    assert team.CALLS["issue_credit"] == before
    assert await credits_of(pg, account) == 0


def replace_input(input: Any, headers: Any) -> Any:
    from dataclasses import replace

    return replace(input, headers=headers)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_failed_check_reaches_the_workflow_or_halts_it(
    team_client: Client, team_worker: str, settings: Settings, bucket: str,
) -> None:
    """The team's workflow catches the refusal as any activity failure (its message names the
    condition and what was seen); where the table says halt, the workflow fails whatever its
    code catches."""
    said = await team_client.execute_workflow(
        CarefulArchiveWorkflow.run, args=[bucket, "gone.csv"],
        id=f"careful-{uuid.uuid4().hex[:8]}", task_queue=team_worker,
        execution_timeout=timedelta(seconds=60))
    assert said.startswith("not archived: plangate refused archive_object: precondition_failed")
    assert "object_exists" in said

    table = GuardTable.load(EXAMPLE / "guards.yaml")
    halting = table.model_copy(update={"activities": {**table.activities, "archive_object":
        table.activities["archive_object"].model_copy(update={"on_failure": "halt"})}})
    queue = f"team-halt-{uuid.uuid4().hex[:8]}"
    wf = f"careful-{uuid.uuid4().hex[:8]}"
    before = team.CALLS["archive_object"]
    async with Worker(team_client, task_queue=queue, workflows=WORKFLOWS, activities=ACTIVITIES,
                      plugins=[PlangatePlugin(halting, settings=settings)]):
        with pytest.raises(WorkflowFailureError) as caught:
            await team_client.execute_workflow(
                CarefulArchiveWorkflow.run, args=[bucket, "gone.csv"], id=wf, task_queue=queue,
                execution_timeout=timedelta(seconds=60))
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "precondition_failed"
    assert team.CALLS["archive_object"] == before


@pytest.mark.asyncio(loop_scope="session")
async def test_guarded_histories_replay_with_the_plugin(
    team_client: Client, team_worker: str, client: Client, settings: Settings, bucket: str,
    s3: Any,
) -> None:
    """The workflow side is deterministic: a guarded run's history (its card, its approval, its
    check and post reads) replays with the plugin, and without the plugin it does not (the
    guard's commands are in it)."""
    from temporalio.worker import Replayer

    account = f"acct-{uuid.uuid4().hex[:8]}"
    wf = f"credit-{uuid.uuid4().hex[:8]}"
    handle = await team_client.start_workflow(
        CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=300),
        id=wf, task_queue=team_worker, execution_timeout=timedelta(seconds=120))
    api = Plangate(client, settings)
    card = await api.wait_for_card(wf, timeout=60)
    await api.approve(wf, card.step, card.digest)
    await handle.result()
    s3.put_object(Bucket=bucket, Key="r.csv", Body=b"x")
    archived = f"archive-{uuid.uuid4().hex[:8]}"
    await team_client.execute_workflow(
        ArchiveWorkflow.run, args=[bucket, "r.csv"], id=archived, task_queue=team_worker,
        execution_timeout=timedelta(seconds=60))
    for run in (wf, archived):
        history = await team_client.get_workflow_handle(run).fetch_history()
        replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter,
                            plugins=[plugin(settings)])
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, result.replay_failure
        bare = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
        result = await bare.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is not None


@pytest.mark.asyncio(loop_scope="session")
async def test_the_approval_page_lists_and_approves_a_guarded_call(
    team_client: Client, team_worker: str, client: Client, settings: Settings, stack: Any,
    pg: psycopg.AsyncConnection[Any], tmp_path: Path,
) -> None:
    import asyncio
    import os

    from tests.conftest import APPROVER_KEYS
    from tests.test_approval_page import logged_in, request, ui_process

    account = f"acct-{uuid.uuid4().hex[:8]}"
    wf = f"credit-{uuid.uuid4().hex[:8]}"
    handle = await team_client.start_workflow(
        CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=4200),
        id=wf, task_queue=team_worker, execution_timeout=timedelta(seconds=180))
    card = await Plangate(client, settings).wait_for_card(wf, timeout=60)
    env = {**os.environ, **stack.env()}
    token = APPROVER_KEYS["erin"].login_token()
    async with ui_process(env, tmp_path / "ui.log") as url:
        session, csrf = await logged_in(url, token)

        async def listed() -> str:
            status, _, body = await asyncio.to_thread(request, url, headers=session)
            assert status == 200
            return body if card.digest in body else ""

        body = await _eventually(listed)
        assert "issue_credit" in body and account in body
        assert await credits_of(pg, account) == 0
        form = {"run_id": wf, "step": card.step, "digest": card.digest, "decision": "approve",
                "csrf": csrf}
        status, _, said = await asyncio.to_thread(request, url + "answer", "POST", form, session)
        assert status == 200 and 'data-outcome="accepted"' in said, said[:2000]
    await handle.result()
    assert await credits_of(pg, account) == 1


@pytest.mark.asyncio(loop_scope="session")
async def test_a_policy_that_changes_while_a_card_waits_decides_the_call(
    team_client: Client, client: Client, settings: Settings, pg: psycopg.AsyncConnection[Any],
    tmp_path: Path,
) -> None:
    """Approved under one bundle, the call is decided again under the bundle in force when it
    goes: a policy added meanwhile that forbids it refuses it (0 credits)."""
    from dataclasses import replace

    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "base.cedar").write_text('@id("base")\npermit(principal, action, resource);\n')
    strict = replace(settings, policy=replace(settings.policy, policies=directory))
    queue = f"team-moved-{uuid.uuid4().hex[:8]}"
    account = f"acct-{uuid.uuid4().hex[:8]}"
    wf = f"credit-{uuid.uuid4().hex[:8]}"
    api = Plangate(client, settings)
    async with await _worker(team_client, strict, queue):
        handle = await team_client.start_workflow(
            CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=700),
            id=wf, task_queue=queue, execution_timeout=timedelta(seconds=120))
        card = await api.wait_for_card(wf, timeout=60)
        assert card.card.policy_bundle is not None
        (directory / "freeze.cedar").write_text(
            '@id("credit-freeze")\nforbid(principal, action == Plangate::Action::"money", '
            'resource) when { resource.tool == "issue_credit" };\n')
        await api.approve(wf, card.step, card.digest)
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
    err = caught.value.cause
    assert isinstance(err, ApplicationError)
    assert err.type == "policy_denied" and "credit-freeze" in err.message
    assert (await scheduled(team_client, wf))["issue_credit"] == 0
    assert await credits_of(pg, account) == 0


@pytest.mark.asyncio(loop_scope="session")
async def test_a_guarded_activity_is_never_run_as_a_local_activity(
    team_client: Client, settings: Settings, pg: psycopg.AsyncConnection[Any],
) -> None:
    from tests.guarded_workflows import LocalCreditWorkflow

    queue = f"team-local-{uuid.uuid4().hex[:8]}"
    account = f"acct-{uuid.uuid4().hex[:8]}"
    before = team.CALLS["issue_credit"]
    async with Worker(team_client, task_queue=queue, workflows=[LocalCreditWorkflow],
                      activities=ACTIVITIES, plugins=[plugin(settings)]):
        with pytest.raises(WorkflowFailureError) as caught:
            await team_client.execute_workflow(
                LocalCreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=5),
                id=f"local-{uuid.uuid4().hex[:8]}", task_queue=queue,
                execution_timeout=timedelta(seconds=60))
    cause = caught.value.cause  # a local activity's failure arrives as its own error
    assert isinstance(cause, ApplicationError)
    assert cause.type == "not_permitted" and "never as a local activity" in cause.message
    assert team.CALLS["issue_credit"] == before
    assert await credits_of(pg, account) == 0


@pytest.mark.asyncio(loop_scope="session")
async def test_temporals_own_cancel_reaches_a_waiting_guarded_call(
    team_client: Client, team_worker: str, client: Client, settings: Settings,
    pg: psycopg.AsyncConnection[Any],
) -> None:
    from temporalio.exceptions import CancelledError

    account = f"acct-{uuid.uuid4().hex[:8]}"
    wf = f"credit-{uuid.uuid4().hex[:8]}"
    handle = await team_client.start_workflow(
        CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=800),
        id=wf, task_queue=team_worker, execution_timeout=timedelta(seconds=120))
    await Plangate(client, settings).wait_for_card(wf, timeout=60)
    await handle.cancel()
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    assert isinstance(caught.value.cause, CancelledError)
    assert (await handle.describe()).status is not None
    assert (await scheduled(team_client, wf))["issue_credit"] == 0
    assert await credits_of(pg, account) == 0


@pytest.mark.asyncio(loop_scope="session")
async def test_a_policy_asking_a_person_holds_the_call_for_a_card(
    team_client: Client, client: Client, settings: Settings, bucket: str, s3: Any,
    tmp_path: Path,
) -> None:
    """A write the table does not send to people, which the deployment's policy does: the call
    goes, is refused at the call for want of an approval (nothing written), waits for a card
    that names the policy, and writes once approved."""
    from dataclasses import replace

    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "person.cedar").write_text(
        '@id("archive-needs-a-person") @approvers("1")\n'
        'permit(principal, action == Plangate::Action::"write", resource)\n'
        'when { resource.tool == "archive_object" };\n'
        '@id("the-rest")\npermit(principal, action, resource)\n'
        'when { resource.tool != "archive_object" };\n')
    strict = replace(settings, policy=replace(settings.policy, policies=directory))
    s3.put_object(Bucket=bucket, Key="p.csv", Body=b"1")
    queue = f"team-person-{uuid.uuid4().hex[:8]}"
    wf = f"archive-{uuid.uuid4().hex[:8]}"
    before = team.CALLS["archive_object"]
    api = Plangate(client, settings)
    async with await _worker(team_client, strict, queue):
        handle = await team_client.start_workflow(
            ArchiveWorkflow.run, args=[bucket, "p.csv"], id=wf, task_queue=queue,
            execution_timeout=timedelta(seconds=120))
        card = await api.wait_for_card(wf, timeout=60)
        assert card.card.policy is not None
        assert card.card.policy.policies == ("archive-needs-a-person",)
        assert card.card.args == {"bucket": bucket, "key": "p.csv"}
        assert team.CALLS["archive_object"] == before
        assert s3.list_objects_v2(Bucket=bucket, Prefix="archive/").get("KeyCount", 0) == 0
        await api.approve(wf, card.step, card.digest)
        assert await handle.result() == "archive/p.csv"
    assert team.CALLS["archive_object"] == before + 1
    assert s3.get_object(Bucket=bucket, Key="archive/p.csv")["Body"].read() == b"1"


def test_a_guard_table_that_does_not_fit_is_refused_naming_what() -> None:
    from plangate.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"archive_object\.effect"):
        GuardTable.load({"activities": {"archive_object": {"effect": "delete"}}})
    clashing = PlangatePlugin({"activities": {"s3.put": {"effect": "write"}}},
                              settings=Settings())
    with pytest.raises(ConfigurationError,
                       match=re.escape("'s3.put' is a tool of plangate's deployment")):
        clashing.guarded.bind({})
    named_as_a_tool = PlangatePlugin({"activities": {"issue_credit": {
        "effect": "money", "reader": {"activity": "s3.put"}}}}, settings=Settings())
    with pytest.raises(ConfigurationError,
                       match=re.escape("'s3.put' is a tool of plangate's deployment")):
        named_as_a_tool.guarded.bind({})
    reader = PlangatePlugin({"activities": {"issue_credit": {
        "effect": "money", "reader": {"activity": "find_it"}}}}, settings=Settings())
    with pytest.raises(ConfigurationError, match=re.escape(
            "entry 'issue_credit' names the reader 'find_it', which is not an activity of this "
            "worker")):
        reader.guarded.bind({"issue_credit": team.issue_credit})


class TeamCodec:
    """A team's own payload codec (each payload wrapped whole, its metadata with it): what the
    guard adds to a result must ride inside it and come back out."""

    ENCODING = b"binary/team-wrapped"

    async def encode(self, payloads: Any) -> list[Any]:
        from temporalio.api.common.v1 import Payload

        return [Payload(metadata={"encoding": self.ENCODING}, data=p.SerializeToString())
                for p in payloads]

    async def decode(self, payloads: Any) -> list[Any]:
        from temporalio.api.common.v1 import Payload

        out = []
        for p in payloads:
            if p.metadata.get("encoding") != self.ENCODING:
                out.append(p)
                continue
            inner = Payload()
            inner.ParseFromString(p.data)
            out.append(inner)
        return out


@pytest.mark.asyncio(loop_scope="session")
async def test_a_teams_codec_carries_the_guard_and_its_payloads_round_trip(
    team_client: Client, settings: Settings, bucket: str, s3: Any,
) -> None:
    import dataclasses

    from temporalio.converter import PayloadCodec

    codec: PayloadCodec = TeamCodec()  # type: ignore[assignment]
    converter = dataclasses.replace(pydantic_data_converter, payload_codec=codec)
    wrapped = await Client.connect(
        team_client.service_client.config.target_host, namespace=team_client.namespace,
        data_converter=converter)
    queue = f"team-codec-{uuid.uuid4().hex[:8]}"
    wf = f"archive-{uuid.uuid4().hex[:8]}"
    s3.put_object(Bucket=bucket, Key="c.csv", Body=b"c")
    async with Worker(wrapped, task_queue=queue, workflows=WORKFLOWS, activities=ACTIVITIES,
                      plugins=[plugin(settings)]):
        assert await wrapped.execute_workflow(
            ArchiveWorkflow.run, args=[bucket, "c.csv"], id=wf, task_queue=queue,
            execution_timeout=timedelta(seconds=60)) == "archive/c.csv"
    assert wrapped.data_converter.payload_codec is codec
    from temporalio.api.enums.v1 import EventType

    events = [e async for e in wrapped.get_workflow_handle(wf).fetch_history_events()]
    (done,) = [e for e in events
               if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
    (result,) = done.activity_task_completed_event_attributes.result.payloads
    assert result.metadata["encoding"] == TeamCodec.ENCODING  # nothing of the guard in clear
    assert s3.get_object(Bucket=bucket, Key="archive/c.csv")["Body"].read() == b"c"
