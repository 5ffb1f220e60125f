"""Temporal's own views tell the truth (issue 22): a run that did not succeed does not show as
Completed in the Web UI, ``temporal workflow list`` or describe. A halted or failed run, and
one cancelled by the ``cancel`` signal, fail their execution with a non-retryable
ApplicationError (``PlanHalted``, ``PlanFailed``, ``PlanCancelled``) whose message is the run's
failure line and whose details are the run report: plangate reads the report there, with no
worker polling. Every timer a run starts says what it waits for."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from datetime import timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionStatus

from plangate.client.api import Plangate
from plangate.client.reporting import finished_runs
from plangate.records.report import RunReport, RunStatus
from plangate.testing import console_script, history_events, running_worker, until_state
from tests.harness import polling_plan

E = EventType


def job_step(n: int, job: str, **extra: Any) -> dict[str, Any]:
    return {"n": n, "tool": "warehouse.run_sql",
            "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
            "post": [{"probe": "job_state", "job_id": job, "want": "done"}], **extra}


def halting(job: str) -> dict[str, Any]:
    # the pre condition never holds and the step says halt
    return {"goal": "halt for a person", "budget": {"replans_max": 2}, "steps": [
        job_step(1, job, pre=[{"probe": "job_state", "job_id": job, "want": "requested"}],
                 on_unmet="halt"),
    ]}


def failing(job: str) -> dict[str, Any]:
    # the same, with no budget to re-plan: the run fails
    return {"goal": "fail with no budget", "budget": {"replans_max": 0}, "steps": [
        job_step(1, job, pre=[{"probe": "job_state", "job_id": job, "want": "requested"}]),
    ]}


async def closed(client: Client, run_id: str) -> WorkflowExecutionStatus | None:
    """The execution's status as visibility lists it, once it lists it closed."""
    for _ in range(100):
        async for wf in client.list_workflows(f'WorkflowId = "{run_id}"'):
            if wf.status not in (None, WorkflowExecutionStatus.RUNNING):
                return wf.status
        await asyncio.sleep(0.1)
    raise AssertionError(f"{run_id} never listed closed")


def failed_event(events: list[HistoryEvent]) -> Any:
    last = events[-1]
    assert last.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, E.Name(last.event_type)
    return last.workflow_execution_failed_event_attributes.failure


async def status_json(env: dict[str, str], run_id: str) -> tuple[int, dict[str, Any]]:
    proc = await asyncio.create_subprocess_exec(
        console_script("plangate"), "status", run_id, "--json", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None, err
    return proc.returncode, json.loads(out)


async def test_halted_failed_and_cancelled_runs_are_not_completed_and_keep_their_reports(
    client, settings, stack
):
    tag = uuid.uuid4().hex[:6]
    ids = {"halted": f"halt-{tag}", "failed": f"fail-{tag}", "cancelled": f"cancel-{tag}"}
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        queue = h.settings.temporal.task_queue
        await api.start(halting(f"h-{tag}"), run_id=ids["halted"])
        await api.start(failing(f"f-{tag}"), run_id=ids["failed"])
        await api.start(polling_plan(f"c-{tag}", replans_max=2), run_id=ids["cancelled"])
        await until_state(api.handle(ids["cancelled"]), 1, "WAITING")
        await api.cancel(ids["cancelled"], reason="goal withdrawn", requester="ops")
        ended = {want: await api.result(run_id) for want, run_id in ids.items()}
    # the worker is gone: what follows is read from Temporal alone
    types = {"halted": "PlanHalted", "failed": "PlanFailed", "cancelled": "PlanCancelled"}
    env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": queue}
    api = Plangate(client, settings)
    for want, run_id in ids.items():
        assert ended[want].status == want, ended[want].escalation
        desc = await api.handle(run_id).describe()
        assert desc.status == WorkflowExecutionStatus.FAILED, (want, desc.status)
        assert await closed(client, run_id) == WorkflowExecutionStatus.FAILED
        failure = failed_event(await history_events(client, run_id))
        info = failure.application_failure_info
        assert (info.type, info.non_retryable) == (types[want], True)
        assert failure.message.startswith(want), failure.message
        # the report rides in the failure's details, read with no worker polling
        rep = await api.report(run_id)
        assert isinstance(rep, RunReport)
        assert rep.model_dump() == ended[want].model_dump()
        assert (await api.result(run_id)).status == want
        code, shown = await status_json(env, run_id)
        assert (code, shown["status"], shown["run_id"]) == (1, want, run_id)
    assert "step 1 (warehouse.run_sql, precondition_unmet)" in failed_event(
        await history_events(client, ids["failed"])).message
    cancelled = ended["cancelled"]
    assert cancelled.cancellation is not None and cancelled.cancellation.reason == "goal withdrawn"
    assert failed_event(await history_events(client, ids["cancelled"])).message == (
        "cancelled by ops: goal withdrawn"
    )
    assert [s.state for s in cancelled.steps] == ["CANCELLED", "CANCELLED"]
    # listed by their own status, and by no other
    listed = Plangate(client, h.settings)  # the runs of the worker's queue
    for want, run_id in ids.items():
        for _ in range(100):
            runs = {r.run_id: r.status for r in await listed.runs(RunStatus(want))}
            if run_id in runs:
                break
            await asyncio.sleep(0.1)
        assert runs.get(run_id) == want, (want, runs)
        others = [s for s in ("halted", "failed", "cancelled") if s != want]
        for other in others:
            assert run_id not in {r.run_id for r in await listed.runs(RunStatus(other))}
    every = {r.run_id: r.status for r in await listed.runs()}
    assert {every[r] for r in ids.values()} == set(ids)
    # the staleness report (``plangate report``) reads the finished runs' reports too
    since = min(r.submitted_at for r in ended.values() if r.submitted_at) - timedelta(seconds=1)
    finished = {f.run_id: f.status for f in await finished_runs(
        client, since, queue)}
    assert {run_id: finished.get(run_id) for run_id in ids.values()} == {
        run_id: want for want, run_id in ids.items()}


async def test_a_cancel_from_temporal_ends_canceled(client, settings):
    async with running_worker(client, settings) as h:
        handle = await h.start(polling_plan(f"tc-{uuid.uuid4().hex[:6]}", replans_max=2))
        await until_state(handle, 1, "WAITING")
        await handle.cancel()  # the Web UI's button
        rep = await Plangate(client, h.settings).result(handle.id)
    assert rep.status == "cancelled"
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED


def timer_summaries(events: list[HistoryEvent]) -> list[str]:
    out = []
    for e in events:
        if e.event_type == E.EVENT_TYPE_TIMER_STARTED:
            summary = e.user_metadata.summary
            out.append(json.loads(summary.data) if summary.data else "")
    return out


async def test_every_timer_says_what_it_waits_for(client, settings):
    tag = uuid.uuid4().hex[:6]
    card = {"goal": "publish", "budget": {"replans_max": 0}, "on_behalf_of": "dana", "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "approval": "required",
         "args": {"statement": "select_one"}},
    ]}
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        waits = await api.start(polling_plan(f"t-{tag}", interval_s=1))
        waits_card = await api.start(card)
        await until_state(api.handle(waits_card), 1, "AWAITING_APPROVAL")
        for _ in range(100):  # two reads of the wait, so two timers between them
            rep = await api.report(waits)
            if sum(c.reads for c in rep.step(1).checks if c.phase == "post") >= 3:
                break
            await asyncio.sleep(0.1)
        for run_id in (waits, waits_card):
            await api.cancel(run_id, reason="seen enough")
            await api.result(run_id)
        reads = timer_summaries(await history_events(client, waits))
        approval = timer_summaries(await history_events(client, waits_card))
    assert len(reads) >= 2
    assert reads[:2] == [
        "step 1 reads the world again in 1 s (read 1 of at most 3601)",
        "step 1 reads the world again in 1 s (read 2 of at most 3601)",
    ]
    rep = await Plangate(client, settings).report(waits_card)
    expires = rep.approvals[0].expires_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    # the card is issued after a 1 ms timer (docs/versioning.md), then waits for its approver
    assert approval == [
        "step 1 issues its approval card",
        f"waiting for an approver for step 1 until {expires}",
    ]
