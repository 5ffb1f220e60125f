"""Queued runs: planned at 23:50, run at 07:30 (seed 001). A run may start later; it dispatches
nothing until then, can be cancelled before it starts, and its staleness window (plan written ->
tool used) shows the night."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType

from plangate.client.api import Plangate
from plangate.testing import running_worker, scheduled


def marked(job: str, made_at: str | None = None) -> dict[str, Any]:
    plan: dict[str, Any] = {"goal": "mark the job", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
         "post": [{"probe": "job_state", "job_id": job, "want": "done"}]},
    ]}
    if made_at:
        plan["made_at"] = made_at
    return plan


async def activities_scheduled(client: Any, run_id: str) -> int:
    n = 0
    async for e in client.get_workflow_handle(run_id).fetch_history_events():
        n += e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    return n


async def test_a_run_queued_for_8_hours_dispatches_nothing_until_then(own_time_skipping_env,
                                                                      settings):
    # a test server of its own: the shared one skips to the timers other tests' runs left
    # (once an hour past the run's start: plan-to-use 9 h)
    env = own_time_skipping_env
    job = f"queued-{uuid.uuid4().hex[:8]}"
    async with running_worker(env.client, settings) as h:
        api = Plangate(env.client, h.settings)
        handle = await api.submit(marked(job), start_in=timedelta(hours=8))
        await env.sleep(timedelta(hours=7, minutes=59))
        assert await activities_scheduled(env.client, handle.id) == 0  # the night passes idle
        rep = await handle.result()  # time skips to the start, and the run goes
    assert rep.status == "succeeded"
    assert (await scheduled(env.client, handle.id))["warehouse.run_sql"] == 1
    # plan-to-use: submitted, then eight hours of night, then the call
    assert rep.metrics.plan_to_use_ms.count == 1
    plan_to_use = rep.metrics.plan_to_use_ms.max or 0.0
    assert timedelta(hours=8) <= timedelta(milliseconds=plan_to_use) < timedelta(hours=8, minutes=5)


async def test_the_window_runs_from_when_the_plan_was_written(client, settings):
    job = f"made-{uuid.uuid4().hex[:8]}"
    async with running_worker(client, settings) as h:
        rep = await h.run(marked(job, made_at="2026-03-11T23:50:00Z"))
    step = rep.step(1)
    assert step.timings.plan_made_at.isoformat().startswith("2026-03-11T23:50:00")
    assert step.staleness_ms is not None and step.staleness_ms > 200 * 24 * 3600 * 1000


async def test_a_queued_run_shows_queued_and_can_be_cancelled_before_it_starts(
    client, settings
):
    job = f"queued-{uuid.uuid4().hex[:8]}"
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(marked(job), start_in=timedelta(hours=8))
        queued = await api.report(run_id)
        assert queued.status == "queued"
        await api.cancel(run_id, reason="the account was closed by hand", requester="dana")
        rep = await asyncio.wait_for(api.result(run_id), 10)
    assert rep.status == "cancelled" and rep.cancellation is not None
    assert rep.cancellation.reason == "the account was closed by hand"
    assert await activities_scheduled(client, run_id) == 0
