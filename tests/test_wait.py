"""WAIT: a state owed by a concurrent step, and a post condition that declares a wait.

Hour-long waits run on the time-skipping test server; the world they poll is real Postgres.
"""

from __future__ import annotations

import asyncio
import uuid

import psycopg
from temporalio import activity

from activities.tool_activity import tool_activities
from records.calls import ToolCall, ToolResult
from tests.harness import polling_plan, running_worker, scheduled, until_state
from world.clients import World


class SlowFirstStep:
    """warehouse.run_sql, but step 1 takes a while before doing its real work."""

    def __init__(self, world: World) -> None:
        self.real = tool_activities(world)["warehouse.run_sql"]
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
    world = World(settings)
    tool = SlowFirstStep(world)
    async with running_worker(client, settings, {"warehouse.run_sql": tool.run}, world=world) as h:
        rep = await h.run(plan)
    assert rep.status == "succeeded"
    assert tool.order == ["start 1", "end 1", "start 2", "end 2"]
    waited = rep.step(2)
    assert "WAITING" in [t.state for t in waited.transitions]
    assert waited.answer == "wait" or waited.state == "DONE"
    assert [r.outcome for c in waited.checks for r in c.results] == ["violated", "holds"]



async def test_post_wait_proceeds_when_the_world_catches_up(time_skipping_env, settings):
    env = time_skipping_env
    job = f"poll-{uuid.uuid4().hex[:8]}"
    async with running_worker(env.client, settings) as h:
        handle = await h.start(polling_plan(job))
        await until_state(handle, 1, "WAITING")  # the first poll has seen "requested"
        async with await psycopg.AsyncConnection.connect(
            settings.database_url, autocommit=True
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
    polls = [c for c in rep.step(1).checks if c.phase == "post"]
    assert len(polls) == 60  # one read a minute for the hour, on durable timers
