"""plangate.temporal with a team's workflows and activities on two workers (one of workflows
only, one of activities only, on one task queue): the card names the arguments as the worker
that runs the activity binds them, the approved call runs once; a table that cannot be guarded
so refuses to start, naming the entry; ``plangate status`` of a team's run says in one line
what it can. Real Temporal, Postgres and S3."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from credits import activities as team
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker

from plangate.client.api import Plangate
from plangate.errors import ConfigurationError
from plangate.temporal import PlangatePlugin
from plangate.testing import scheduled
from plangate.world.settings import Settings
from tests.split_team import GRANTS, GrantWorkflow, grant_credit
from tests.temporal_team import team_env

__all__ = ["team_env"]

PARAMS = ["account_id", "amount", "reason"]
THRESHOLD = (  # credits over 10 (whole units) wait for one person
    '@id("credits-over-10") @approvers("1")\n'
    'permit(principal, action == Plangate::Action::"money", resource)\n'
    'when { resource.tool == "grant_credit" && context.amount_cents > 1000 };\n'
    '@id("the-rest")\npermit(principal, action, resource)\n'
    'unless { resource.tool == "grant_credit" && context.amount_cents > 1000 };\n')


def table(**entry: Any) -> dict[str, Any]:
    return {"activities": {"grant_credit": {
        "effect": "money", "amount": "amount", "params": PARAMS,
        "reader": {"activity": "find_credit", "args": {"key": "key"}},
        "post": [{"probe": "effect_recorded"}], **entry}}}


@pytest_asyncio.fixture(loop_scope="session")
async def team_client(settings: Settings, team_env: None) -> Client:
    await team.ensure_schema()
    return await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace,
                                data_converter=pydantic_data_converter)


def plangate_cli(stack: Any, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "plangate", *argv], capture_output=True,
                          text=True, env={**os.environ, **stack.env()}, timeout=120)


@pytest.mark.asyncio(loop_scope="session")
async def test_workflows_and_activities_on_two_workers_card_names_and_credits_once(
    team_client: Client, client: Client, settings: Settings, tmp_path: Path,
    pg: psycopg.AsyncConnection[Any],
) -> None:
    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "threshold.cedar").write_text(THRESHOLD)
    strict = replace(settings, policy=replace(settings.policy, policies=directory))
    queue = f"team-split-{uuid.uuid4().hex[:8]}"
    account = f"acct-{uuid.uuid4().hex[:8]}"
    wf = f"grant-{uuid.uuid4().hex[:8]}"
    plugin = PlangatePlugin(table(), settings=strict, principal="support-agent")
    workflows = Worker(team_client, task_queue=queue, workflows=[GrantWorkflow],
                       plugins=[plugin], identity="team-workflows")
    acts = Worker(team_client, task_queue=queue, activities=[grant_credit, team.find_credit],
                  plugins=[PlangatePlugin(table(), settings=strict, principal="support-agent")],
                  identity="team-activities")
    api = Plangate(client, settings)
    async with workflows, acts:
        handle = await team_client.start_workflow(
            GrantWorkflow.run, args=[account, 25, "goodwill"], id=wf, task_queue=queue,
            execution_timeout=timedelta(seconds=120))
        card = await api.wait_for_card(wf, timeout=60)
        assert card.card.tool == "grant_credit"
        assert card.card.args == {"account_id": account, "amount": 25, "reason": "goodwill"}
        assert card.card.policy is not None
        assert card.card.policy.policies == ("credits-over-10",)
        assert GRANTS[account] == 0
        await api.approve(wf, card.step, card.digest)
        credit_id = await handle.result()
        rep = await api.report(wf)
    assert GRANTS[account] == 1
    cur = await pg.execute("SELECT credit_id, amount_cents FROM team.credits "
                           "WHERE account_id = %s", (account,))
    assert await cur.fetchall() == [(credit_id, 2500)]
    cur = await pg.execute("SELECT tool, state, approver, principal, amount FROM "
                           "plangate.effects WHERE run_id = %s", (wf,))
    assert await cur.fetchall() == [("grant_credit", "done", "erin", "support-agent", 25)]
    # the call went at once, was refused at the call for want of the card, then went approved;
    # each time to the activities' worker, at its first attempt (the workflows' polls none)
    assert (await scheduled(team_client, wf))["grant_credit"] == 2
    started = [e.activity_task_started_event_attributes async for e in
               team_client.get_workflow_handle(wf).fetch_history_events()
               if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
    assert [(a.identity, a.attempt) for a in started] == [("team-activities", 1)] * 2
    (step,) = rep.steps
    assert step.state.value == "DONE"
    assert [c.results[0].outcome.value for c in step.checks if c.phase.value == "post"] == [
        "holds"]


@pytest.mark.asyncio(loop_scope="session")
async def test_a_table_a_worker_cannot_guard_refuses_to_start_naming_the_entry(
    team_client: Client, settings: Settings,
) -> None:
    def worker(entry: dict[str, Any], **kw: Any) -> Worker:
        return Worker(team_client, task_queue=f"never-polled-{uuid.uuid4().hex[:8]}",
                      plugins=[PlangatePlugin(table(**entry), settings=settings)], **kw)

    # workflows only: the names of the arguments are nowhere on this worker
    with pytest.raises(ConfigurationError, match=r"entry 'grant_credit'.*add params: \["):
        worker({"params": None}, workflows=[GrantWorkflow])
    # a pre condition read here before its card reads through the reader, which is not here
    with pytest.raises(ConfigurationError,
                       match=r"entry 'grant_credit'.*effect_recorded reads through the reader "
                             r"'find_credit'.*register find_credit on this worker"):
        worker({"pre": [{"probe": "effect_recorded"}]}, workflows=[GrantWorkflow])
    # the activity here: its reader is needed here, and params must be its function's
    with pytest.raises(ConfigurationError,
                       match=r"entry 'grant_credit' names the reader 'find_credit', which is "
                             r"not an activity of this worker"):
        worker({}, activities=[grant_credit])
    with pytest.raises(ConfigurationError, match=re.escape(
            "entry 'grant_credit' says params ['account', 'amount', 'reason'] and this "
            "worker's activity grant_credit takes ['account_id', 'amount', 'reason']")):
        worker({"params": ["account", "amount", "reason"]},
               activities=[grant_credit, team.find_credit])
    # a worker of workflows whose entry says params, and one of the activity: both start
    alone = worker({}, workflows=[GrantWorkflow])
    worker({"params": None}, activities=[grant_credit, team.find_credit])
    # plangate's activities are local only: the workflows' worker polls no activity task,
    # unless a plugin configured after plangate's may add activities
    assert alone.config(active_config=True).get("no_remote_activities") is True
    followed = Worker(team_client, task_queue=f"never-polled-{uuid.uuid4().hex[:8]}",
                      workflows=[GrantWorkflow],
                      plugins=[PlangatePlugin(table(), settings=settings),
                               SimplePlugin("team.later")])
    assert not followed.config(active_config=True).get("no_remote_activities")


@pytest.mark.asyncio(loop_scope="session")
async def test_plangate_status_of_a_teams_run_is_one_line_in_every_state(
    team_client: Client, settings: Settings, stack: Any,
) -> None:
    queue = f"team-status-{uuid.uuid4().hex[:8]}"
    secret = f"acct-{uuid.uuid4().hex[:8]}"  # the team's input: never printed by plangate
    done, refused, gone = (f"{w}-{uuid.uuid4().hex[:8]}" for w in ("done", "no", "gone"))
    for wf in (done, gone):
        await team_client.start_workflow(
            GrantWorkflow.run, args=[secret, 5, "x"], id=wf, task_queue=queue,
            execution_timeout=timedelta(seconds=120))
    await team_client.get_workflow_handle(gone).terminate(reason="not wanted")

    def one_line(out: subprocess.CompletedProcess[str], code: int) -> str:
        assert out.returncode == code, out.stderr
        assert "Traceback" not in out.stderr and "ValidationError" not in out.stderr
        assert secret not in out.stdout + out.stderr
        (line,) = out.stderr.splitlines()
        return line

    async def status(wf: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(plangate_cli, stack, "status", wf)

    # no worker has taken it: running, and terminated
    assert one_line(await status(done), 1) == (
        f"plangate: run '{done}', a GrantWorkflow workflow of a team's, has no report to "
        "show: it has not begun: no worker has taken it (a team's run is reported by its "
        f"worker's PlangatePlugin, task queue {queue}); Temporal's execution status: running")
    assert one_line(await status(gone), 1) == (
        f"plangate: run '{gone}', a GrantWorkflow workflow of a team's, has no report to "
        "show: it ended before a worker began it (a team's run is reported by its worker's "
        f"PlangatePlugin, task queue {queue}); Temporal's execution status: terminated")
    plugin = PlangatePlugin(table(), settings=settings, principal="support-agent")
    async with Worker(team_client, task_queue=queue, workflows=[GrantWorkflow],
                      activities=[grant_credit, team.find_credit], plugins=[plugin]):
        assert await team_client.get_workflow_handle(done).result()
        with pytest.raises(WorkflowFailureError):  # the team's own activity refuses it
            await team_client.execute_workflow(
                GrantWorkflow.run, args=[secret, -1, "x"], id=refused, task_queue=queue,
                execution_timeout=timedelta(seconds=60))
        succeeded, failed = await status(done), await status(refused)
    assert succeeded.returncode == 0, succeeded.stderr
    assert succeeded.stdout.splitlines()[0] == f"run {done}: succeeded (plan version 1)"
    assert failed.returncode == 1, failed.stderr
    assert failed.stdout.splitlines()[0].startswith(f"run {refused}: failed")
    # a worker without the plugin's workflow guard: no report query
    bare = f"{queue}-bare"
    async with Worker(team_client, task_queue=bare, workflows=[GrantWorkflow],
                      activities=[grant_credit]):
        await team_client.execute_workflow(
            GrantWorkflow.run, args=[secret, 5, "x"], id=f"{done}-bare", task_queue=bare,
            execution_timeout=timedelta(seconds=60))
        line = one_line(await status(f"{done}-bare"), 1)
    assert line.startswith(f"plangate: run '{done}-bare', a GrantWorkflow workflow of a team's, "
                           "has no report to show: its worker answers no report query (")
