"""plangate.temporal as a guest on a team's worker (issue 49): it reaches Temporal through the
worker's own client alone, a guarded call's handle is the SDK's ``ActivityHandle``, and a
refused call fails the team's workflow with an ``ApplicationError`` whose type is plangate's code
(the halting ones listed in the worker's workflow failure exception types), read from the
history. Real Temporal, Postgres and S3."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from credits import activities as team
from credits.workflows import ArchiveWorkflow, CarefulArchiveWorkflow, CreditWorkflow
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowFailureError
from temporalio.worker import Worker

from plangate.activities.call_checks import HEARTBEAT_EVERY_S
from plangate.client.api import Plangate
from plangate.temporal import GuardHalted, GuardTable, PlangatePlugin
from plangate.world.settings import Settings
from tests.guarded_workflows import HandleArchiveWorkflow
from tests.temporal_team import EXAMPLE, bucket, team_env
from tests.test_temporal_plugin import ACTIVITIES, WORKFLOWS, plugin, team_client, team_worker

__all__ = ["bucket", "team_client", "team_env", "team_worker"]

E = EventType


async def events(client: Client, wf: str) -> list[HistoryEvent]:
    return [e async for e in client.get_workflow_handle(wf).fetch_history_events()]


def failed_with(history: list[HistoryEvent]) -> Any:
    """The failure the workflow execution failed with (its last event), after no workflow task
    failed (a refusal fails the workflow, never its task)."""
    assert not [e for e in history if e.event_type == E.EVENT_TYPE_WORKFLOW_TASK_FAILED]
    last = history[-1]
    assert last.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, E.Name(last.event_type)
    return last.workflow_execution_failed_event_attributes.failure


@pytest.mark.asyncio(loop_scope="session")
async def test_the_plugin_uses_the_workers_own_client(
    team_client: Client, settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No connection of its own: ``Client.connect`` is never called while the worker starts
    and runs a workflow; what it asks of Temporal (its search attributes) it asks of the
    worker's client, and is answered."""
    connects: list[Any] = []
    real = Client.connect

    async def counted(*args: Any, **kwargs: Any) -> Client:
        connects.append(args)
        return await real(*args, **kwargs)

    monkeypatch.setattr(Client, "connect", counted)
    guard = plugin(settings)
    queue = f"team-own-{uuid.uuid4().hex[:8]}"
    async with Worker(team_client, task_queue=queue, workflows=WORKFLOWS,
                      activities=ACTIVITIES, plugins=[guard]):
        assert await team_client.execute_workflow(
            "CountWorkflow", 3, id=f"count-{uuid.uuid4().hex[:8]}",
            task_queue=queue, execution_timeout=timedelta(seconds=60)) == 3
        # the worker runs (its run context entered): no connection opened; the namespace's
        # search attributes were asked of the worker's client, and are there
        assert connects == []
        assert guard.client is team_client and guard.guarded.visible


@pytest.mark.asyncio(loop_scope="session")
async def test_a_guarded_calls_handle_is_the_sdks_activity_handle(
    team_client: Client, settings: Settings, bucket: str, s3: Any,
) -> None:
    s3.put_object(Bucket=bucket, Key="h.csv", Body=b"h")
    queue = f"team-handle-{uuid.uuid4().hex[:8]}"
    async with Worker(team_client, task_queue=queue, workflows=[HandleArchiveWorkflow],
                      activities=ACTIVITIES, plugins=[plugin(settings)]):
        said = await team_client.execute_workflow(
            HandleArchiveWorkflow.run, args=[bucket, "h.csv"],
            id=f"handle-{uuid.uuid4().hex[:8]}", task_queue=queue,
            execution_timeout=timedelta(seconds=60))
    assert said == ["ActivityHandle", "True", "archive/h.csv"]
    assert s3.get_object(Bucket=bucket, Key="archive/h.csv")["Body"].read() == b"h"


@activity.defn(name="archive_object")
def archive_object_sync(bucket: str, key: str) -> str:
    """The team's archive as a plain function (run in the worker's thread pool), working
    through more than two of the guard's heartbeats."""
    time.sleep(HEARTBEAT_EVERY_S * 2.5)
    team._s3().copy_object(Bucket=bucket, Key=f"archive/{key}",
                           CopySource={"Bucket": bucket, "Key": key})
    return f"archive/{key}"


@pytest.mark.asyncio(loop_scope="session")
async def test_a_guarded_sync_activity_acts_once_on_its_first_attempt(
    team_client: Client, settings: Settings, bucket: str, s3: Any,
) -> None:
    """A sync activity's context heartbeats through the event loop and waits for it (the SDK);
    the guard's own beat, on that loop, must not call it while the function runs: the call
    completes on attempt 1, one copy made."""
    s3.put_object(Bucket=bucket, Key="sync.csv", Body=b"s")
    queue = f"team-sync-{uuid.uuid4().hex[:8]}"
    wf = f"sync-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(2) as pool:
        async with Worker(team_client, task_queue=queue, workflows=[ArchiveWorkflow],
                          activities=[archive_object_sync], activity_executor=pool,
                          plugins=[plugin(settings)]):
            assert await team_client.execute_workflow(
                ArchiveWorkflow.run, args=[bucket, "sync.csv"], id=wf, task_queue=queue,
                execution_timeout=timedelta(seconds=60)) == "archive/sync.csv"
    history = await events(team_client, wf)
    started = [e.activity_task_started_event_attributes.attempt for e in history
               if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_STARTED]
    assert started == [1]
    assert [e for e in history if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
    assert s3.get_object(Bucket=bucket, Key="archive/sync.csv")["Body"].read() == b"s"


@pytest.mark.asyncio(loop_scope="session")
async def test_a_refusal_fails_the_teams_workflow_with_plangates_code(
    team_client: Client, team_worker: str, client: Client, settings: Settings, bucket: str,
) -> None:
    """Refused at the call (412, uncaught): the execution fails with an ApplicationError of
    type ``precondition_failed``, its cause the activity's failure as the SDK recorded it (its
    scheduled event, not a forged one). Refused before any dispatch (a rejected card): type
    ``approval_rejected``, no activity in it."""
    wf = f"archive-{uuid.uuid4().hex[:8]}"
    with pytest.raises(WorkflowFailureError):
        await team_client.execute_workflow(
            ArchiveWorkflow.run, args=[bucket, "absent.csv"], id=wf, task_queue=team_worker,
            execution_timeout=timedelta(seconds=60))
    history = await events(team_client, wf)
    failure = failed_with(history)
    assert failure.application_failure_info.type == "precondition_failed"
    assert failure.application_failure_info.non_retryable
    assert failure.message.startswith("plangate refused archive_object: precondition_failed (412)")
    (scheduled,) = [e.event_id for e in history
                    if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    assert failure.cause.activity_failure_info.scheduled_event_id == scheduled
    assert failure.cause.cause.application_failure_info.type == "precondition_failed"

    account = f"acct-{uuid.uuid4().hex[:8]}"
    wf = f"credit-{uuid.uuid4().hex[:8]}"
    handle = await team_client.start_workflow(
        CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=600),
        id=wf, task_queue=team_worker, execution_timeout=timedelta(seconds=120))
    api = Plangate(client, settings)
    card = await api.wait_for_card(wf, timeout=60)
    await api.reject(wf, card.step, card.digest, reason="wrong account")
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    history = await events(team_client, wf)
    failure = failed_with(history)
    assert failure.application_failure_info.type == "approval_rejected"
    assert "wrong account" in failure.message
    assert not failure.HasField("cause")
    assert not [e for e in history if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]


@pytest.mark.asyncio(loop_scope="session")
async def test_a_halt_fails_the_workflow_whatever_its_code_catches(
    team_client: Client, settings: Settings, bucket: str,
) -> None:
    table = GuardTable.load(EXAMPLE / "guards.yaml")
    halting = table.model_copy(update={"activities": {**table.activities, "archive_object":
        table.activities["archive_object"].model_copy(update={"on_failure": "halt"})}})
    queue = f"team-halt-{uuid.uuid4().hex[:8]}"
    wf = f"careful-{uuid.uuid4().hex[:8]}"
    worker = Worker(team_client, task_queue=queue, workflows=WORKFLOWS, activities=ACTIVITIES,
                    plugins=[PlangatePlugin(halting, settings=settings)])
    assert GuardHalted in worker.config(active_config=True)["workflow_failure_exception_types"]
    async with worker:
        with pytest.raises(WorkflowFailureError):
            await team_client.execute_workflow(
                CarefulArchiveWorkflow.run, args=[bucket, "gone.csv"], id=wf, task_queue=queue,
                execution_timeout=timedelta(seconds=60))
    failure = failed_with(await events(team_client, wf))
    assert failure.application_failure_info.type == "precondition_failed"
    assert failure.message.startswith("plangate halted archive_object: precondition_failed")
