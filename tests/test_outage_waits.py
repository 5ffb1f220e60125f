"""Outages plangate's guards and tools meet before anything is sent are waited out (issue 47):
the guards that cannot record the run's submission, a tool whose effect ledger does not answer.
Each as a probe's outage is: read again after 2 s, doubling, up to the run's outage patience;
never an attempt of the step's, never a failed run. The faults are real resets of the worker's
Postgres (``tests.fault_proxy``) at a chosen activity (``tests.fault_points``)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from temporalio.api.enums.v1 import EventType

from plangate.records.interface import GUARD_ACTIVITY
from plangate.records.proofs import Submitter
from plangate.records.report import RunReport
from plangate.records.signing import SigningKey
from plangate.testing import history_events, running_worker
from plangate.workflows.context import INDEX_PATCH
from plangate.world.settings import Settings
from tests.fault_points import FaultPoints, Kind, Point, When, through_proxy


async def run_through_a_reset(client: Any, settings: Settings, plan: dict[str, Any],
                              at: str, for_s: float) -> RunReport:
    """``plan`` run to its end on a worker whose Postgres is reset for ``for_s`` seconds as
    activity ``at`` first begins."""
    async with through_proxy(settings) as p:
        faults = FaultPoints(Point(at, When.BEFORE, p.proxy, Kind.RESET, for_s))
        try:
            async with running_worker(client, p.settings, world=p.world,
                                      interceptors=[faults]) as h:
                rep: RunReport = await (await h.start(plan)).result()
        finally:
            await faults.close()
    return rep

async def test_guards_that_cannot_record_the_submission_wait_for_postgres(client, settings, s3,
                                                                         world):
    """A deployment that lists submitters claims each submission in Postgres before the run
    acts (``guard.resolve``). Postgres reset for 25 s there, past the claim's own 20 s: before,
    the run failed ("refused before any step acted"); now the guards are asked again, as a
    step's probes are, and the run goes on when Postgres is back."""
    agent = SigningKey.generate("agent")
    signed = replace(settings, policy=replace(
        settings.policy, submitters=(Submitter(agent.name, agent.public, ("ops",)),)),
        identity=replace(settings.identity, submitter_key=agent))
    bucket = f"guards-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    plan = {"goal": "write a note", "on_behalf_of": "ops", "budget": {"replans_max": 0},
            "steps": [{"n": 1, "tool": "s3.put",
                       "args": {"bucket": bucket, "key": "note.txt", "body": "after the outage"}}]}
    rep = await run_through_a_reset(client, signed, plan, GUARD_ACTIVITY, 25.0)
    assert rep.status == "succeeded", (rep.status, rep.escalation)
    assert rep.step(1).state == "DONE"
    assert s3.get_object(Bucket=bucket, Key="note.txt")["Body"].read() == b"after the outage"
    events = await history_events(client, rep.run_id)
    timers = [e for e in events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
    markers = [e for e in events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
               and INDEX_PATCH.encode() in e.SerializeToString()]
    assert timers and markers, "the guards did not wait"
    async with (await world.pool()).connection() as conn:
        cur = await conn.execute(
            "SELECT execution FROM plangate.submissions WHERE execution LIKE %s",
            (f"{rep.run_id}/%",))
        assert len(await cur.fetchall()) == 1  # claimed once, when Postgres answered


async def test_a_tool_that_cannot_write_its_intent_waits_for_postgres(client, settings, s3):
    """``s3.put`` whose effect ledger (Postgres) is reset for 18 s as it is called: it sends
    nothing (``system_unavailable``: the intent was not recorded). Before, that spent the
    step's attempts in seconds and the run halted; now the step waits for Postgres as a
    probe's outage is waited for, and writes its object once, when Postgres is back."""
    bucket = f"intent-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    plan = {"goal": "write a note", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "args": {"bucket": bucket, "key": "n.txt", "body": "once"}}]}
    rep = await run_through_a_reset(client, settings, plan, "s3.put", 18.0)
    assert rep.status == "succeeded", (rep.status, rep.escalation)
    assert rep.step(1).state == "DONE"
    versions = s3.list_object_versions(Bucket=bucket).get("Versions", [])
    assert [v["Key"] for v in versions] == ["n.txt"]
    events = await history_events(client, rep.run_id)
    assert [e for e in events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
            and INDEX_PATCH.encode() in e.SerializeToString()]
