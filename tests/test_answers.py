"""The answers to a failed check, asserted on the world: skip (resume), halt, attribution."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType, TimeoutType

from plangate.records.calls import ToolCall, ToolResult
from plangate.testing import attempts, history_events, running_worker, scheduled
from tests.heartbeat import BEAT_S, beating


def job_step(n: int, job: str, state: str = "done", **extra: Any) -> dict[str, Any]:
    return {
        "n": n, "tool": "warehouse.run_sql", "depends_on": [n - 1] if n > 1 else [],
        "args": {"statement": "set_job_state", "params": {"job_id": job, "state": state}},
        "post": [{"probe": "job_state", "job_id": job, "want": state}],
        **extra,
    }


async def job_states(pg: Any, prefix: str) -> dict[str, str]:
    cur = await pg.execute(
        "SELECT job_id, state FROM plangate.jobs WHERE job_id LIKE %s", (prefix + "%",)
    )
    return {j: s for j, s in await cur.fetchall()}


async def test_resume_skips_done_steps_and_resumes_at_the_failure(client, settings, pg):
    tag = uuid.uuid4().hex[:8]
    table = f"resume_{tag}"
    await pg.execute(f"CREATE TABLE {table} (id int)")  # the test's own literal name
    steps = [job_step(n, f"{tag}-{n}") for n in range(1, 8)]
    steps[4]["pre"] = [{"probe": "column_exists", "table": table, "column": "ready"}]
    plan = {"goal": "seven steps", "budget": {"replans_max": 0}, "steps": steps}
    async with running_worker(client, settings) as h:
        first = await h.run(plan)
        assert [s.state for s in first.steps] == ["DONE"] * 4 + ["FAILED", "VOID", "VOID"]
        # step 5's pre condition is first read at its own call (step 4's read after its call
        # held step 5's skip check only): its activity was started and refused it, the tool
        # never ran; four steps acted
        assert (await scheduled(client, first.run_id))["warehouse.run_sql"] == 5
        assert [c.phase for c in first.step(5).checks] == ["skip+pre", "at-call", "pre"]
        assert first.failure is not None and first.failure.code == "precondition_unmet"
        assert len(await job_states(pg, tag)) == 4

        await pg.execute(f"ALTER TABLE {table} ADD COLUMN ready bool")  # someone fixes the world
        # resumed as the same run: the jobs its steps set are its own (another run's are not)
        second = await h.run(plan, run_id=first.run_id)
    assert second.status == "succeeded"
    assert [s.state for s in second.steps] == ["SKIPPED"] * 4 + ["DONE"] * 3
    assert all(s.attempts == 0 and s.answer == "skip" for s in second.steps[:4])
    # Zero tool calls for steps 1-4: the only run_sql calls are steps 5, 6 and 7.
    assert (await scheduled(client, second.run_id))["warehouse.run_sql"] == 3
    assert len(await job_states(pg, tag)) == 7


async def test_destroyed_state_is_attributed_to_the_step_that_established_it(client, settings):
    job = f"attr-{uuid.uuid4().hex[:8]}"
    plan = {"goal": "attribution", "budget": {"replans_max": 0}, "steps": [
        job_step(1, job, "done"),
        job_step(2, job, "failed"),  # the world moves after step 1 verified it
        {"n": 3, "tool": "warehouse.run_sql", "depends_on": [2],
         "args": {"statement": "select_one"},
         "pre": [{"probe": "job_state", "job_id": job, "want": "done"}]},
    ]}
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == 2
    assert rep.failure is not None and rep.failure.step == 3
    assert (rep.failure.attribution, rep.failure.established_by) == ("destroyed", 1)


async def test_on_unmet_halt_stops_for_a_person(client, settings, pg):
    job = f"halt-{uuid.uuid4().hex[:8]}"
    plan = {"goal": "halt", "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "args": {"statement": "select_one"},
         "pre": [{"probe": "job_state", "job_id": job, "want": "done"}], "on_unmet": "halt"},
        job_step(2, job),
    ]}
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    assert rep.status == "halted" and rep.escalation == "step 1 halted: a person must look"
    assert [s.state for s in rep.steps] == ["HALTED", "VOID"]
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == 0
    assert await job_states(pg, job) == {}


class LostAnswer:
    """A money tool whose request left and whose answer never came back."""

    def __init__(self) -> None:
        self.calls: Counter[int] = Counter()

    @activity.defn(name="warehouse.run_sql")
    async def run(self, call: ToolCall) -> ToolResult:
        self.calls[call.step.n] += 1
        raise ConnectionResetError("connection reset after the request was sent")


async def test_unknown_outcome_of_a_money_step_halts(client, settings):
    tool = LostAnswer()
    plan = {"goal": "pay", "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "effect": "money",
         "args": {"statement": "select_one"}, "on_unmet": "replan"},
        {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
         "args": {"statement": "select_one"}},
    ]}
    async with running_worker(client, settings, {"warehouse.run_sql": tool.run}) as h:
        rep = await h.run(plan)
    assert rep.status == "halted"
    assert rep.failure is not None and rep.failure.code == "outcome_unknown"
    assert tool.calls == {1: 1}  # attempted once, never blindly again
    assert (await attempts(client, rep.run_id))["warehouse.run_sql"] == [1]
    assert rep.steps[1].state == "VOID"


class NoAnswer:
    """An external tool whose request left and which then went silent: no result, no heartbeat."""

    def __init__(self) -> None:
        self.calls = 0

    @activity.defn(name="warehouse.run_sql")
    async def run(self, call: ToolCall) -> ToolResult:
        self.calls += 1
        await asyncio.sleep(3600)
        raise AssertionError("the heartbeat timeout ends this attempt first")


async def test_a_timed_out_external_step_halts(client, settings):
    # Costs the worker's heartbeat timeout in real time (10 s: PLANGATE_TOOL_HEARTBEAT_TIMEOUT):
    # timeouts are what is under test.
    tool = NoAnswer()
    plan = {"goal": "notify the vendor", "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "effect": "external",
         "args": {"statement": "select_one"}},
        {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
         "args": {"statement": "select_one"}},
    ]}
    async with running_worker(client, beating(settings), {"warehouse.run_sql": tool.run}) as h:
        rep = await h.run(plan)
    assert rep.status == "halted" and tool.calls == 1
    assert rep.failure is not None and rep.failure.code == "outcome_unknown"
    assert "timed out" in rep.failure.detail
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == 1
    assert rep.steps[1].state == "VOID"
    # the worker's heartbeat timeout was the call's, and it is what ended the call
    events = await history_events(client, rep.run_id)
    (call,) = [e.activity_task_scheduled_event_attributes for e in events
               if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
               and e.activity_task_scheduled_event_attributes.activity_type.name
               == "warehouse.run_sql"]
    assert call.heartbeat_timeout.ToTimedelta() == timedelta(seconds=BEAT_S)
    (timed_out,) = [e.activity_task_timed_out_event_attributes for e in events
                    if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT]
    assert timed_out.failure.timeout_failure_info.timeout_type == TimeoutType.TIMEOUT_TYPE_HEARTBEAT
