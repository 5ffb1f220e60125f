"""Cancelling a run, with a reason and who asked: nothing is dispatched after it, the run ends
cancelled, and the report says why."""

from __future__ import annotations

import asyncio
import uuid

from plangate.api import Plangate, RunEnded
from plangate.cli import main
from tests.harness import polling_plan, running_worker, scheduled, until_state


async def test_cancel_by_the_api_records_the_reason(client, settings):
    job = f"cancel-{uuid.uuid4().hex[:8]}"
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(polling_plan(job, replans_max=2))
        await until_state(api.handle(run_id), 1, "WAITING")
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
        monkeypatch.setenv("PLANGATE_TASK_QUEUE", h.settings.task_queue)
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
