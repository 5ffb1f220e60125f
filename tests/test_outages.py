"""Outages: Postgres, then S3, stopped in the middle of a run and started again. A step whose
probes read a stopped system never acts; it waits for the system (reading again, 2 s, doubling,
at most a minute apart) up to the run's outage patience, and goes on when the system is back,
without spending the re-planning budget. Past the patience it halts. The model endpoint down:
the run halts with an escalation after one re-planning attempt, no loop.

Each test stops services of an embedded stack of its own (Postgres and S3; Temporal is the
session's), so no other test meets the outage.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from plangate.dev.stack import EmbeddedStack
from plangate.records.interface import PROPOSE_ACTIVITY
from plangate.records.report import RunReport
from plangate.replanner.activity import ReplanActivities
from plangate.replanner.backends.openai import OpenAIBackend
from plangate.testing import (
    attempts,
    history_events,
    payload_json,
    running_worker,
    scheduled,
    stack_state,
)
from plangate.workflows.plan_run import PlanRunWorkflow
from plangate.world.clients import World
from plangate.world.settings import ModelSettings, Settings


@pytest_asyncio.fixture(loop_scope="session")
async def outage(settings: Settings) -> AsyncIterator[tuple[EmbeddedStack, Settings]]:
    with stack_state("outage") as state:
        async with EmbeddedStack(state, temporal=False) as own:
            yield own, replace(
                settings,
                world=replace(settings.world, database_url=own.database_url,
                              s3_endpoint_url=own.s3_endpoint_url),
                runs=replace(settings.runs, outage_patience_s=120.0),
            )


async def until(handle: WorkflowHandle[Any, RunReport], n: int, words: str) -> RunReport:
    """The report once step ``n`` waits with ``words`` in its reason (30 s at most)."""
    for _ in range(300):
        rep = await handle.query(PlanRunWorkflow.report)
        step = rep.step(n)
        if step.state == "WAITING" and words in step.reason:
            return rep
        await asyncio.sleep(0.1)
    raise AssertionError(f"step {n} never waited for {words!r}: {step.state} {step.reason}")


def job_plan(job: str, **step: Any) -> dict[str, Any]:
    return {"goal": "mark the job", "budget": {"replans_max": 2}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
         "post": [{"probe": "job_state", "job_id": job, "want": "done"}], **step},
    ]}


def publish_plan(job: str, state: str, bucket: str, **post: Any) -> dict[str, Any]:
    """Set the job to ``state`` (its post condition: done, with ``post``), then publish."""
    return {"goal": "mark the job, then publish", "budget": {"replans_max": 2}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": job, "state": state}},
         "post": [{"probe": "job_state", "job_id": job, "want": "done", **post}]},
        {"n": 2, "tool": "s3.put", "depends_on": [1],
         "args": {"bucket": bucket, "key": "figures.txt", "body": "final figures"}},
    ]}


async def job_state(url: str, job: str) -> Any:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute("SELECT state FROM plangate.jobs WHERE job_id = %s", (job,))
        return await cur.fetchone()


async def test_a_postgres_outage_is_waited_out_and_nothing_acts_meanwhile(client, outage):
    own, s = outage
    job = f"pg-{uuid.uuid4().hex[:8]}"
    async with running_worker(client, s, world=World(s.world)) as h:
        await own.stop_service("postgres")
        handle = await h.start(job_plan(job))
        rep = await until(handle, 1, "postgres did not answer")
        assert rep.status == "running" and rep.step(1).answer == "wait"
        await asyncio.sleep(1.5)  # more reads of the stopped system
        assert (await scheduled(client, handle.id)).get("warehouse.run_sql", 0) == 0
        await own.start_service("postgres")
        rep = await asyncio.wait_for(handle.result(), 90)
    assert rep.status == "succeeded" and rep.replans_used == 0 and rep.plan_version == 1
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == 1
    assert await job_state(own.database_url, job) == ("done",)
    down = [r for c in rep.step(1).checks for r in c.results if r.outcome == "unknown"]
    assert down and all(r.unreachable for r in down)
    assert rep.step(1).checks[-1].results[0].outcome == "holds"  # the post check, after
    # done, it no longer shows the wait it moved on from (was "DONE [wait: postgres did not
    # answer ...]")
    assert (rep.step(1).state, rep.step(1).answer, rep.step(1).reason) == ("DONE", None, "")
    assert "WAITING" in [t.state for t in rep.step(1).transitions]


async def test_an_s3_outage_mid_run_holds_the_write_until_s3_is_back(client, outage):
    own, s = outage
    tag = uuid.uuid4().hex[:8]
    job, bucket = f"s3-{tag}", f"outage-{tag}"
    plan = publish_plan(job, "requested", bucket, wait={"timeout_s": 120, "interval_s": 1})
    world = World(s.world)
    await asyncio.to_thread(world.s3.create_bucket, Bucket=bucket)
    async with running_worker(client, s, world=world) as h:
        handle = await h.start(plan)
        await until(handle, 1, "declares a wait")  # step 1 acted and waits for the export
        await own.stop_service("s3")  # S3 goes down while the run waits
        url = s.world.database_url
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as c:
            await c.execute("UPDATE plangate.jobs SET state = 'done' WHERE job_id = %s", (job,))
        await until(handle, 2, "s3 did not answer")
        await asyncio.sleep(1.5)
        assert (await scheduled(client, handle.id)).get("s3.put", 0) == 0
        await own.start_service("s3")
        rep = await asyncio.wait_for(handle.result(), 90)
    assert rep.status == "succeeded" and rep.replans_used == 0
    assert (await scheduled(client, rep.run_id))["s3.put"] == 1
    body = await asyncio.to_thread(world.s3.get_object, Bucket=bucket, Key="figures.txt")
    assert body["Body"].read() == b"final figures"


async def test_a_read_made_for_the_next_step_while_its_system_was_down_is_no_read(client, outage):
    # Step 2's first read is made in step 1's activity, right after its call, while S3 is down:
    # it could not answer. Step 2 reads again itself and waits for S3 like any read of a system
    # that does not answer; the read that could not answer never counts as a failed pre condition.
    own, s = outage
    tag = uuid.uuid4().hex[:8]
    job, bucket = f"fused-{tag}", f"fused-{tag}"
    plan = publish_plan(job, "done", bucket)
    world = World(s.world)
    await asyncio.to_thread(world.s3.create_bucket, Bucket=bucket)
    async with running_worker(client, s, world=world) as h:
        await own.stop_service("s3")
        try:
            handle = await h.start(plan)
            await until(handle, 2, "s3 did not answer")
            assert (await scheduled(client, handle.id)).get("s3.put", 0) == 0
        finally:
            await own.start_service("s3")
        rep = await asyncio.wait_for(handle.result(), 90)
    assert rep.status == "succeeded" and rep.replans_used == 0 and rep.plan_version == 1
    calls = await scheduled(client, rep.run_id)
    assert calls["warehouse.run_sql"] == 1 and calls["s3.put"] == 1
    body = await asyncio.to_thread(world.s3.get_object, Bucket=bucket, Key="figures.txt")
    assert body["Body"].read() == b"final figures"
    # the read in step 1's call asked S3 for step 2 (and could not reach it)
    fused = [payload_json(p) for e in await history_events(client, rep.run_id)
             if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
             for p in e.activity_task_completed_event_attributes.result.payloads]
    after = fused[0]["after"]["results"]
    assert [r["outcome"] for r in after] == ["holds", "unknown", "unknown"]
    assert all(r["unreachable"] for r in after[1:])
    down = [r for c in rep.step(2).checks for r in c.results if r.outcome == "unknown"]
    assert down and all(r.unreachable for r in down)


async def test_past_the_patience_the_step_halts_and_nothing_is_re_planned(client, outage):
    own, s = outage
    job = f"patience-{uuid.uuid4().hex[:8]}"
    short = replace(s, runs=replace(s.runs, outage_patience_s=4.0))
    async with running_worker(client, short, world=World(short.world)) as h:
        await own.stop_service("postgres")
        try:
            rep = await asyncio.wait_for(h.run(job_plan(job)), 90)
        finally:
            await own.start_service("postgres")
    assert rep.status == "halted" and rep.replans_used == 0 and rep.replans == []
    assert rep.failure is not None and rep.failure.code == "system_unavailable"
    assert rep.step(1).state == "HALTED" and "outage patience" in rep.step(1).reason
    calls = await scheduled(client, rep.run_id)
    assert calls.get("warehouse.run_sql", 0) == 0 and calls["probe.evaluate"] >= 1


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("replans_max", [2])
async def test_the_model_endpoint_down_halts_with_an_escalation_and_no_loop(
    client, settings, replans_max
):
    down = replace(settings, model=ModelSettings(
        replanner="openai", name="fake-model",
        base_url=f"http://127.0.0.1:{closed_port()}/v1", api_key="sk-test",
    ))
    backend = OpenAIBackend.from_settings(down.model, down.catalogue)
    model = ReplanActivities(down.model, down.catalogue, backend=backend)
    plan = {"goal": "count", "budget": {"replans_max": replans_max}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "args": {"statement": "select_one"},
         "pre": [{"probe": "column_exists", "table": f"nowhere_{uuid.uuid4().hex[:8]}",
                  "column": "id"}]},
    ]}
    async with running_worker(client, down, {PROPOSE_ACTIVITY: model.propose}) as h:
        rep = await asyncio.wait_for(h.run(plan), 60)
    assert rep.status == "halted" and rep.replans_used == 1  # asked once, not the budget
    assert rep.escalation is not None and "gave no answer" in rep.escalation
    # the one child asked the endpoint as often as the propose activity's policy allows
    assert (await attempts(client, f"{rep.run_id}/replan-1"))["replanner.propose"] == [3]
    assert (await scheduled(client, rep.run_id)).get("warehouse.run_sql", 0) == 0
