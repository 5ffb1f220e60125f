"""WAIT: a state owed by a concurrent step, and a post condition that declares a wait.

Hour-long waits run on the time-skipping test server; the world they poll is real Postgres.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import psycopg
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from plangate.activities.tool_activity import tool_activities
from plangate.records.calls import ToolCall, ToolResult
from plangate.testing import running_worker, scheduled, until_state
from plangate.workflows.plan_run import PlanRunWorkflow
from plangate.world.clients import World
from plangate.world.settings import Settings
from tests.harness import polling_plan


async def timers(client: Client, run_id: str) -> list[timedelta]:
    """The duration of every timer the run started, from its history."""
    out: list[timedelta] = []
    async for e in client.get_workflow_handle(run_id).fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
            out.append(e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta())
    return out


class SlowFirstStep:
    """warehouse.run_sql, but step 1 takes a while before doing its real work."""

    def __init__(self, world: World, settings: Settings) -> None:
        self.real = tool_activities(world, settings.catalogue, settings.policy)["warehouse.run_sql"]
        self.order: list[str] = []

    @activity.defn(name="warehouse.run_sql")
    async def run(self, call: ToolCall) -> ToolResult:
        self.order.append(f"start {call.step.n}")
        if call.step.n == 1:
            await asyncio.sleep(1.5)
        result: ToolResult = await self.real(call)
        self.order.append(f"end {call.step.n}")
        return result


async def test_a_state_owed_by_a_concurrent_step_is_waited_for(client, settings):
    job = f"owed-{uuid.uuid4().hex[:8]}"
    plan = {"goal": "concurrent", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
         "post": [{"probe": "job_state", "job_id": job, "want": "done"}]},
        {"n": 2, "tool": "warehouse.run_sql", "args": {"statement": "select_one"},
         "pre": [{"probe": "job_state", "job_id": job, "want": "done"}]},
    ]}
    world = World(settings.world)
    tool = SlowFirstStep(world, settings)
    async with running_worker(client, settings, {"warehouse.run_sql": tool.run}, world=world) as h:
        handle = await h.start(plan)
        await until_state(handle, 2, "WAITING")
        waiting = (await handle.query(PlanRunWorkflow.report)).step(2)
        rep = await handle.result()
    assert rep.status == "succeeded"
    assert tool.order == ["start 1", "end 1", "start 2", "end 2"]
    waited = rep.step(2)
    # step 2's pre condition, read while step 1 still ran, was owed by step 1: it waited for
    # step 1 (not for a timer), read again, and only then acted; done, it no longer shows the
    # wait it moved on from
    assert waiting.answer == "wait" and "has not finished" in waiting.reason
    assert (waited.answer, waited.reason) == (None, "")
    assert [t.state for t in waited.transitions] == [
        "PROBING", "WAITING", "PROBING", "EXECUTING", "VERIFYING", "DONE"
    ]
    # read while step 1 ran, again after it, and at the call (in the tool's activity)
    assert [(c.phase, r.outcome) for c in waited.checks for r in c.results] == [
        ("pre", "violated"), ("pre", "holds"), ("at-call", "holds")
    ]
    # local reads: step 1's skip check and step 2's first pre read (both with the guards),
    # step 2's second pre read; step 1's post check is read in its own activity
    assert await scheduled(client, rep.run_id) == {
        "guard.resolve": 1, "warehouse.run_sql": 2, "probe.evaluate": 1}


async def test_post_wait_proceeds_when_the_world_catches_up(time_skipping_env, settings):
    env = time_skipping_env
    job = f"poll-{uuid.uuid4().hex[:8]}"
    async with running_worker(env.client, settings) as h:
        handle = await h.start(polling_plan(job))
        await until_state(handle, 1, "WAITING")  # the first poll has seen "requested"
        async with await psycopg.AsyncConnection.connect(
            settings.world.database_url, autocommit=True
        ) as conn:  # the vendor's export lands
            await conn.execute("UPDATE plangate.jobs SET state = 'done' WHERE job_id = %s", (job,))
        rep = await handle.result()
    assert rep.status == "succeeded"
    assert (await scheduled(env.client, rep.run_id))["warehouse.run_sql"] == 2
    polls = [c.results[0].outcome for c in rep.step(1).checks if c.phase == "post"]
    assert polls[0] == "violated" and polls[-1] == "holds"
    assert "WAITING" in [t.state for t in rep.step(1).transitions]


async def test_post_wait_past_its_deadline_fails_and_the_next_tool_never_runs(
    time_skipping_env, settings
):
    env = time_skipping_env
    job = f"late-{uuid.uuid4().hex[:8]}"
    async with running_worker(env.client, settings) as h:
        rep = await h.run(polling_plan(job))
    assert rep.status == "failed"
    assert rep.failure is not None and rep.failure.step == 1
    assert rep.failure.code == "postcondition_unmet"
    calls = await scheduled(env.client, rep.run_id)
    assert calls["warehouse.run_sql"] == 1  # step 2 never ran
    # The plan's wait is an hour with a read a minute: the first read right after the call,
    # then one at each minute up to and including the deadline: 1 + 3600 / 60 = 61 reads,
    # with 60 durable one-minute timers between them. The report keeps the first read and the
    # latest, which counts the 60 after the first: a day of reads keeps it small.
    polls = [c for c in rep.step(1).checks if c.phase == "post"]
    assert [c.reads for c in polls] == [1, 60]
    assert sum(c.reads for c in polls) == 61
    states = [(t.state, t.times) for t in rep.step(1).transitions]
    assert states[-4:] == [("VERIFYING", 1), ("WAITING", 60), ("VERIFYING", 60), ("REPLANNING", 1)]
    assert await timers(env.client, rep.run_id) == [timedelta(seconds=60)] * 60


async def test_a_wait_for_a_step_that_will_never_start_ends_with_the_failure(
    time_skipping_env, settings
):
    # Found by plan fuzzing: step 3's pre condition is owed by step 2, so step 3 waits for step
    # 2 to end; step 1 fails, so step 2 (after it) will never start. Step 2 is VOID at once and
    # step 3 stops waiting: it reads again and fails too, instead of waiting out its hour.
    job, missing = f"never-{uuid.uuid4().hex[:8]}", f"missing-{uuid.uuid4().hex[:8]}"
    owed = {"probe": "job_state", "job_id": job, "want": "done"}
    plan = {"goal": "never", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "args": {"statement": "select_one"},
         "pre": [{"probe": "job_state", "job_id": missing, "want": "done"}]},
        {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
         "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
         "post": [owed]},
        {"n": 3, "tool": "warehouse.run_sql", "args": {"statement": "select_one"}, "pre": [owed]},
    ]}
    env = time_skipping_env
    async with running_worker(env.client, settings) as h:
        rep = await h.run(plan)
    assert rep.status == "failed"
    assert rep.failure is not None and rep.failure.step == 1
    assert rep.failure.code == "precondition_unmet"
    assert rep.step(2).state == "VOID"
    third = rep.step(3)
    assert third.state.final and third.state not in ("DONE", "SKIPPED")
    assert "did not establish it within" not in third.reason
    # no tool ran, and no timer fired: nobody waited out an hour (on the time-skipping server
    # an hour's timer would have fired at once)
    assert "warehouse.run_sql" not in await scheduled(env.client, rep.run_id)
    fired = [e async for e in env.client.get_workflow_handle(rep.run_id).fetch_history_events()
             if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED]
    assert fired == []
