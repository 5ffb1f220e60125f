"""Cancelling a run: nothing is dispatched after it, and the run ends cancelled."""

from __future__ import annotations

import asyncio
import uuid

from plangate import runs
from plangate.cli import main
from tests.harness import running_worker, scheduled
from workflows.plan_run import PlanRunWorkflow


async def test_cancel_stops_a_waiting_run(client, settings, stack, monkeypatch):
    job = f"cancel-{uuid.uuid4().hex[:8]}"
    plan = {"goal": "wait, then load", "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "requested"}},
         "post": [{"probe": "job_state", "job_id": job, "want": "done",
                   "wait": {"timeout_s": 3600, "interval_s": 60}}]},
        {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
         "args": {"statement": "select_one"}},
    ]}
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    async with running_worker(client, settings) as h:
        handle = await h.start(plan)
        for _ in range(200):
            if (await handle.query(PlanRunWorkflow.report)).step(1).state == "WAITING":
                break
            await asyncio.sleep(0.05)
        code = await asyncio.to_thread(main, ["cancel", handle.id, "--reason", "goal changed"])
        assert code == 0
        rep = await runs.follow(client, handle.id)
    assert rep.status == "cancelled"
    assert [s.state for s in rep.steps] == ["CANCELLED", "CANCELLED"]
    assert (await scheduled(client, handle.id))["warehouse.run_sql"] == 1
