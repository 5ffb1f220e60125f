"""Cancelling a run, with a reason and who asked: nothing is dispatched after it, the run ends
cancelled, and the report says why."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio import activity

from plangate.cli import main
from plangate.client.api import Plangate, RunEnded
from plangate.records.calls import ToolCall, ToolResult
from plangate.testing import running_worker, scheduled, until_state
from tests.harness import polling_plan


async def waiting_run(api: Plangate) -> str:
    """A run whose step 1 waits for the world (a job nobody marks done)."""
    run_id = await api.start(polling_plan(f"cancel-{uuid.uuid4().hex[:8]}", replans_max=2))
    await until_state(api.handle(run_id), 1, "WAITING")
    return run_id


async def test_cancel_by_the_api_records_the_reason(client, settings):
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await waiting_run(api)
        await api.cancel(run_id, reason="goal withdrawn", requester="ops@example.com")
        rep = await api.result(run_id)
        try:
            await api.cancel(run_id, reason="again")
            raise AssertionError("a second cancel of an ended run was accepted")
        except RunEnded:
            pass
    assert rep.status == "cancelled"
    assert rep.cancellation is not None
    assert (rep.cancellation.reason, rep.cancellation.requester) == (
        "goal withdrawn", "ops@example.com"
    )
    assert [s.state for s in rep.steps] == ["CANCELLED", "CANCELLED"]
    assert (await scheduled(client, run_id))["warehouse.run_sql"] == 1  # step 2 never ran


async def test_cancel_by_the_cli_with_reason_and_requester(client, settings, stack, monkeypatch):
    job = f"cancel-{uuid.uuid4().hex[:8]}"
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    async with running_worker(client, settings) as h:
        monkeypatch.setenv("PLANGATE_TASK_QUEUE", h.settings.temporal.task_queue)
        handle = await h.start(polling_plan(job, replans_max=2))
        await until_state(handle, 1, "WAITING")
        code = await asyncio.to_thread(
            main, ["cancel", handle.id, "--reason", "goal changed", "--as", "dana"]
        )
        assert code == 0
        rep = await Plangate(client, h.settings).result(handle.id)
    assert rep.status == "cancelled" and rep.cancellation is not None
    assert (rep.cancellation.reason, rep.cancellation.requester) == ("goal changed", "dana")
    assert (await scheduled(client, handle.id))["warehouse.run_sql"] == 1


async def test_a_cancel_from_temporal_itself_still_cancels(client, settings):
    job = f"cancel-{uuid.uuid4().hex[:8]}"
    async with running_worker(client, settings) as h:
        handle = await h.start(polling_plan(job, replans_max=2))
        await until_state(handle, 1, "WAITING")
        await handle.cancel()  # the Web UI's button: no reason of its own
        rep = await Plangate(client, h.settings).result(handle.id)
    assert rep.status == "cancelled" and rep.cancellation is None
    assert (await scheduled(client, handle.id))["warehouse.run_sql"] == 1


class Inflight:
    """warehouse.run_sql whose step 1 (optionally) does its real work, then keeps working,
    heartbeating, until the run's cancel reaches it."""

    def __init__(self, world, settings, acts: bool) -> None:
        from plangate.activities.tool_activity import tool_activities

        tools = tool_activities(world, settings.catalogue, settings.policy)
        self.real = tools["warehouse.run_sql"]
        self.acts = acts
        self.started = asyncio.Event()
        self.cancelled = False

    @activity.defn(name="warehouse.run_sql")
    async def run(self, call: ToolCall) -> ToolResult:
        if call.step.n != 1:
            result: ToolResult = await self.real(call)
            return result
        if self.acts:
            await self.real(call)
        self.started.set()
        try:
            while True:
                activity.heartbeat()
                await asyncio.sleep(0.2)
        except asyncio.CancelledError:
            self.cancelled = True
            raise


def marked(job: str) -> dict[str, Any]:
    return {"goal": "mark and go on", "budget": {"replans_max": 2}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
         "post": [{"probe": "job_state", "job_id": job, "want": "done"}]},
        {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
         "args": {"statement": "select_one"}},
    ]}


@pytest.mark.parametrize(("acts", "outcome"), [(True, "done"), (False, "not_done")])
async def test_cancel_reaches_a_tool_in_flight_and_reports_what_it_did(
    client, settings, world, acts, outcome
):
    job = f"inflight-{uuid.uuid4().hex[:8]}"
    tool = Inflight(world, settings, acts)
    async with running_worker(client, settings, {"warehouse.run_sql": tool.run}) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(marked(job))
        await asyncio.wait_for(tool.started.wait(), 10)
        await api.cancel(run_id, reason="goal withdrawn", requester="ops")
        rep = await api.result(run_id)
    assert tool.cancelled  # the cancel reached the tool (through its heartbeat)
    assert rep.status == "cancelled" and rep.cancellation is not None
    assert rep.cancellation.reason == "goal withdrawn"
    step = rep.step(1)
    assert step.state == "CANCELLED" and step.cancel_outcome == outcome
    assert [c.phase for c in step.checks][-1] == "after-cancel"
    assert rep.step(2).state == "CANCELLED"
    assert (await scheduled(client, run_id))["warehouse.run_sql"] == 1  # step 2 never dispatched


async def test_a_run_whose_worker_is_gone_can_be_cancelled_and_takes_it_when_one_returns(
    client, settings
):
    """Only a run that has not begun is ended at once, and the server tells it with no worker:
    a running run whose worker is gone (its report query unanswered) is sent the cancel signal
    all the same, and takes it when a worker polls its queue again."""
    from temporalio.api.enums.v1 import EventType

    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await waiting_run(api)
    await api.cancel(run_id, reason="worker gone", requester="ops")
    signals = [
        e.workflow_execution_signaled_event_attributes.signal_name
        async for e in api.handle(run_id).fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    ]
    assert signals == ["cancel"]
    async with running_worker(client, settings, queue=h.settings.temporal.task_queue):
        rep = await api.result(run_id)
    assert rep.status == "cancelled" and rep.cancellation is not None
    assert (rep.cancellation.reason, rep.cancellation.requester) == ("worker gone", "ops")
    assert (await scheduled(client, run_id))["warehouse.run_sql"] == 1  # step 2 never ran
