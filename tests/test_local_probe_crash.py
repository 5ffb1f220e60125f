"""Probes run as local activities: a worker that dies in the middle of one leaves no record of
it, so the next worker reads the world again. It never assumes what the lost read would have
said."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from temporalio import activity

from plangate.client.api import Plangate
from plangate.records.calls import Outcome, ProbeReport, ProbeRequest, ProbeResult
from plangate.records.interface import GUARD_ACTIVITY, PROBE_ACTIVITY
from plangate.testing import ended, scheduled
from plangate.worker.assembly import build_worker
from tests.harness import guards_alone


class FirstReadHangs:
    """probe.evaluate whose first read never returns (the worker dies under it); later reads
    answer from the world as it is then."""

    def __init__(self) -> None:
        self.calls = 0
        self.hanging = asyncio.Event()
        self.holds = False  # the world, as the later reads see it

    @activity.defn(name=PROBE_ACTIVITY)
    async def evaluate(self, req: ProbeRequest) -> ProbeReport:
        self.calls += 1
        if self.calls == 1:
            self.hanging.set()
            await asyncio.sleep(3600)
        outcome = Outcome.HOLDS if self.holds else Outcome.VIOLATED
        return ProbeReport(
            results=[ProbeResult(condition=c, outcome=outcome) for c in req.conditions],
            read_at=datetime.now(UTC), elapsed_ms=0.0,
        )


def plan(job: str) -> dict[str, Any]:
    return {"goal": "mark", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "on_unmet": "halt",
         "args": {"statement": "select_one"},
         "pre": [{"probe": "job_state", "job_id": job, "want": "done"}]},
    ]}


async def test_a_worker_that_dies_during_a_probe_reads_again(client, settings):
    # Costs the probe's 30 s timeout in real time: the stopping worker waits for its read.
    probe = FirstReadHangs()
    job = f"crash-{uuid.uuid4().hex[:8]}"
    own = replace(settings, temporal=replace(settings.temporal,
                                             task_queue=f"crash-{uuid.uuid4().hex[:8]}"))
    # the first read made by the probe activity, not with the guards: the double is what it meets
    doubles = {PROBE_ACTIVITY: probe.evaluate, GUARD_ACTIVITY: guards_alone(own)}
    async with await build_worker(client, own, doubles=doubles):
        handle = await Plangate(client, own).submit(plan(job))
        await asyncio.wait_for(probe.hanging.wait(), 10)
    # (its shutdown waits out the hanging read's timeout, 30 s: a crash would not)
    # that worker is gone mid-read: nothing of the read was recorded
    async with await build_worker(client, own, doubles=doubles):
        rep = await asyncio.wait_for(ended(handle), 60)
    assert probe.calls == 2  # read again on the next worker, not assumed
    assert rep.status == "halted" and rep.failure is not None
    assert rep.failure.code == "precondition_unmet"  # what the second read saw
    assert (await scheduled(client, rep.run_id)).get("warehouse.run_sql", 0) == 0
    assert (await scheduled(client, rep.run_id))["probe.evaluate"] == 1  # one recorded read
