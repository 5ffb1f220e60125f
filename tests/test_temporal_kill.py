"""plangate.temporal when a team's worker dies between an effect and its answer, and when a run
is reset past its approval: the example team's own worker (examples/temporal_team/run_worker.py)
as a process, killed with SIGKILL; real Temporal, Postgres and S3. What is asserted is in the
world (the credit rows), in plangate's effect ledger and in the workflow's history.

Nothing here waits on a guess of how long something takes: the world is polled with generous
deadlines, and the credit's answer is held (``TEAM_CREDIT_PAUSE_S``) longer than the activity's
start-to-close timeout, so the first attempt cannot answer: it ends by the kill (noticed by
its missed heartbeats, which plangate's guard sends while a guarded activity runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio
import yaml
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from plangate.client.api import Plangate
from plangate.records import keys
from plangate.temporal import PlangatePlugin
from plangate.testing import attempts
from plangate.world.settings import Settings
from tests.temporal_team import EXAMPLE, team_world

ROOT = EXAMPLE.parents[1]

from credits import activities as team  # noqa: E402
from credits.workflows import CreditWorkflow  # noqa: E402

ACTIVITIES: list[Callable[..., Any]] = [team.issue_credit, team.find_credit, team.load_export,
                                        team.archive_object, team.count_rows]
READY = "team worker polling"
# longer than CreditWorkflow's start-to-close timeout (30 s): the first attempt never answers
HOLD_S = "120"
DEADLINE_S = 120.0  # any one wait on the world, on a loaded machine


@pytest_asyncio.fixture(loop_scope="session")
async def team_client(stack: Any, settings: Settings,
                      monkeypatch: pytest.MonkeyPatch) -> Client:
    for k, v in team_world(stack).items():
        monkeypatch.setenv(k, v)
    await team.ensure_schema()
    return await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace,
                                data_converter=pydantic_data_converter)


def without_reader(tmp_path: Path) -> Path:
    """The example's guard table with no reader of ``issue_credit`` (nor the post check that
    reads the credit through it)."""
    table = yaml.safe_load((EXAMPLE / "guards.yaml").read_text())
    credit = table["activities"]["issue_credit"]
    del credit["reader"], credit["post"]
    path = tmp_path / "guards-no-reader.yaml"
    path.write_text(yaml.safe_dump(table))
    return path


class TeamWorkerProcess:
    """``python run_worker.py --queue Q --guards G`` in a session of its own (SIGKILL goes to
    its whole process group), its output in ``log``."""

    def __init__(self, queue: str, guards: Path, env: dict[str, str], log: Path) -> None:
        self.args = ["run_worker.py", "--queue", queue, "--guards", str(guards)]
        self.env = env
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, *self.args, cwd=EXAMPLE, env=self.env,
                stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        while READY not in self.log.read_text(errors="replace"):
            if self.proc.returncode is not None:
                raise AssertionError(f"the team's worker ended before it was ready:\n"
                                     f"{self.log.read_text(errors='replace')}")
            if loop.time() > deadline:
                raise AssertionError(f"the team's worker was not ready in {DEADLINE_S:g} s")
            await asyncio.sleep(0.1)

    async def kill(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()


@contextlib.asynccontextmanager
async def team_process(stack: Any, queue: str, guards: Path,
                       log: Path) -> AsyncIterator[TeamWorkerProcess]:
    env = {**os.environ, **stack.env(), **team_world(stack), "TEAM_CREDIT_PAUSE_S": HOLD_S,
           # the worktree's plangate, whatever the environment installed
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    worker = TeamWorkerProcess(queue, guards, env, log)
    try:
        await worker.start()
        yield worker
    finally:
        await worker.kill()


def in_process(client: Client, settings: Settings, queue: str, guards: Path) -> Worker:
    return Worker(client, task_queue=queue, workflows=[CreditWorkflow], activities=ACTIVITIES,
                  plugins=[PlangatePlugin(guards, settings=settings, principal="support-agent")])


async def credit_rows(pg: psycopg.AsyncConnection[Any], account: str) -> list[tuple[Any, ...]]:
    cur = await pg.execute(
        "SELECT credit_id, call_key, amount_cents FROM team.credits WHERE account_id = %s",
        (account,))
    return list(await cur.fetchall())


async def ledger_rows(pg: psycopg.AsyncConnection[Any], run_id: str) -> list[tuple[Any, ...]]:
    cur = await pg.execute(
        "SELECT idempotency_key, tool, state, detail FROM plangate.effects WHERE run_id = %s",
        (run_id,))
    return list(await cur.fetchall())


async def credited(pg: psycopg.AsyncConnection[Any], account: str) -> tuple[Any, ...]:
    """The account's credit, once its row is in (the activity then holds its answer)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not (rows := await credit_rows(pg, account)):
        if loop.time() > deadline:
            raise AssertionError(f"no credit of {account} in {DEADLINE_S:g} s")
        await asyncio.sleep(0.05)
    return rows[0]


async def start_credit(client: Client, queue: str, account: str,
                       cents: int) -> WorkflowHandle[Any, team.Credit]:
    return await client.start_workflow(
        CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=cents),
        id=f"credit-{uuid.uuid4().hex[:10]}", task_queue=queue,
        execution_timeout=timedelta(seconds=600))


async def approve_card(api: Plangate, run_id: str) -> None:
    card = await api.wait_for_card(run_id, timeout=DEADLINE_S)
    assert card.card.tool == "issue_credit"
    await api.approve(run_id, card.step, card.digest)


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("reader", [True, False], ids=["reader", "no-reader"])
async def test_a_worker_killed_between_the_credit_and_its_answer(
    reader: bool, stack: Any, settings: Settings, client: Client, team_client: Client,
    pg: psycopg.AsyncConnection[Any], tmp_path: Path,
) -> None:
    """The team's worker process credits the account and is killed (SIGKILL) before it
    answers; another worker takes the activity's retry. With ``find_credit`` as the reader:
    the credit is read back by the call's key and answered, the run completes. Without a
    reader: the call is not made again, the run halts ``outcome_unknown``. Once credited,
    either way."""
    guards = EXAMPLE / "guards.yaml" if reader else without_reader(tmp_path)
    queue = f"team-kill-{uuid.uuid4().hex[:8]}"
    account = f"acct-{uuid.uuid4().hex[:8]}"
    api = Plangate(client, settings)
    async with team_process(stack, queue, guards, tmp_path / "worker.log") as first:
        handle = await start_credit(team_client, queue, account, 4200)
        await approve_card(api, handle.id)
        credit_id, key, cents = await credited(pg, account)
        await first.kill()
    assert cents == 4200 and keys.of_workflow(key, handle.id)
    assert await ledger_rows(pg, handle.id) == [(key, "issue_credit", "intent", "")]

    before = team.CALLS["issue_credit"]
    async with in_process(team_client, settings, queue, guards):
        if reader:
            result = await asyncio.wait_for(handle.result(), 4 * DEADLINE_S)
        else:
            with pytest.raises(WorkflowFailureError) as failed:
                await asyncio.wait_for(handle.result(), 4 * DEADLINE_S)
        rep = await api.report(handle.id)
    assert team.CALLS["issue_credit"] == before  # the second worker never ran its body
    assert await credit_rows(pg, account) == [(credit_id, key, 4200)]
    # the first attempt ended by the kill (its heartbeat timeout); a later one was the ledger's
    (tried,) = (await attempts(team_client, handle.id))["issue_credit"]
    assert tried >= 2
    step = rep.steps[0]
    if reader:
        assert result == team.Credit(credit_id=credit_id, account_id=account, amount_cents=4200)
        assert await ledger_rows(pg, handle.id) == [
            (key, "issue_credit", "done", "read back by key")]
        assert (step.tool, step.state.value) == ("issue_credit", "DONE")
    else:
        cause = failed.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "outcome_unknown"
        assert "has no reader by key" in cause.message
        assert await ledger_rows(pg, handle.id) == [(key, "issue_credit", "intent", "")]
        assert (step.state.value, rep.status.value) == ("HALTED", "halted")


async def first_task_completed(client: Client, run_id: str, run: str) -> int:
    async for e in client.get_workflow_handle(run_id, run_id=run).fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            return e.event_id
    raise AssertionError(f"{run_id}: no workflow task completed")


async def ran_in(client: Client, run_id: str, run: str) -> list[str]:
    """The activities run ``run`` scheduled, in order (its own history only)."""
    return [e.activity_task_scheduled_event_attributes.activity_type.name
            async for e in client.get_workflow_handle(run_id, run_id=run).fetch_history_events()
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]


@pytest.mark.asyncio(loop_scope="session")
async def test_a_reset_past_the_approval_is_answered_by_the_ledger(
    settings: Settings, client: Client, team_client: Client, pg: psycopg.AsyncConnection[Any],
) -> None:
    """A completed credit, then ``temporal workflow reset --type FirstWorkflowTask``: the new
    run asks for a card again and, approved, calls ``issue_credit`` again under the same
    idempotency key: the ledger answers it with the first call's credit; the body does not
    run; one credit in the world."""
    queue = f"team-reset-{uuid.uuid4().hex[:8]}"
    account = f"acct-{uuid.uuid4().hex[:8]}"
    api = Plangate(client, settings)
    async with in_process(team_client, settings, queue, EXAMPLE / "guards.yaml"):
        handle = await start_credit(team_client, queue, account, 700)
        await approve_card(api, handle.id)
        first = await asyncio.wait_for(handle.result(), DEADLINE_S)
        [(credit_id, key, _)] = await credit_rows(pg, account)
        assert first.credit_id == credit_id
        before = team.CALLS["issue_credit"]

        original = (await handle.describe()).run_id
        assert original is not None
        reset = await team_client.workflow_service.reset_workflow_execution(
            ResetWorkflowExecutionRequest(
                namespace=team_client.namespace,
                workflow_execution=WorkflowExecution(workflow_id=handle.id, run_id=original),
                reason="the kill tests: reset to before the approval",
                request_id=str(uuid.uuid4()),
                workflow_task_finish_event_id=await first_task_completed(
                    team_client, handle.id, original),
            ))
        again = team_client.get_workflow_handle(handle.id, run_id=reset.run_id,
                                                result_type=team.Credit)
        await approve_card(api, handle.id)  # the new run's own card
        second = await asyncio.wait_for(again.result(), DEADLINE_S)
        rep = await api.report(handle.id)
    assert second == first  # the first call's credit, from the ledger
    assert team.CALLS["issue_credit"] == before
    assert await credit_rows(pg, account) == [(credit_id, key, 700)]
    assert await ledger_rows(pg, handle.id) == [(key, "issue_credit", "done", "")]
    assert await ran_in(team_client, handle.id, reset.run_id) == ["issue_credit"]
    assert rep.steps[0].state.value == "DONE" and rep.steps[0].ledger is not None
    assert rep.steps[0].ledger.key == key
