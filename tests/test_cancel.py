"""Cancelling a run: nothing is dispatched after it, and the run ends cancelled."""

from __future__ import annotations

import asyncio
import uuid

from plangate import runs
from plangate.cli import main
from tests.harness import polling_plan, running_worker, scheduled, until_state


async def test_cancel_stops_a_waiting_run(client, settings, stack, monkeypatch):
    job = f"cancel-{uuid.uuid4().hex[:8]}"
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    async with running_worker(client, settings) as h:
        handle = await h.start(polling_plan(job, replans_max=2))
        await until_state(handle, 1, "WAITING")
        code = await asyncio.to_thread(main, ["cancel", handle.id, "--reason", "goal changed"])
        assert code == 0
        rep = await runs.follow(client, handle.id)
    assert rep.status == "cancelled"
    assert [s.state for s in rep.steps] == ["CANCELLED", "CANCELLED"]
    assert (await scheduled(client, handle.id))["warehouse.run_sql"] == 1
