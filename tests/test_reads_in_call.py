"""Reads in the tool's own activity (``ToolCall.check`` and ``after``): the pre conditions
are read again the instant before the tool acts, and the tool is not called unless they hold;
the post check (with the next step's first read) is read the instant after it returns."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from temporalio.api.enums.v1 import ApplicationErrorCategory, EventType

from plangate.activities.probe_activity import ProbeActivities
from plangate.activities.tool_activity import read_after, refuse_unless_held, tool_activities
from plangate.activities.tools.registry import TOOLS
from plangate.plans.model import Condition
from plangate.records.calls import (
    Outcome,
    ProbeReport,
    ProbeRequest,
    ProbeResult,
    StepRef,
    ToolCall,
    ToolResult,
)
from plangate.records.interface import GUARD_ACTIVITY, INDEX_ACTIVITY, WINDOWS_ACTIVITY
from plangate.records.report import Phase, StepState
from plangate.testing import local_activity, running_worker
from plangate.workflows.context import INDEX_PATCH
from plangate.world.errors import ToolError
from tests.harness import MovedBeforeCall

E = EventType


def mark(n: int, job: str, gate: str | None = None, **extra: Any) -> dict[str, Any]:
    step: dict[str, Any] = {
        "n": n, "tool": "warehouse.run_sql",
        "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
        "post": [{"probe": "job_state", "job_id": job, "want": "done"}], **extra,
    }
    if gate is not None:
        step["pre"] = [{"probe": "job_state", "job_id": gate, "want": "open"}]
    return step


async def set_job(pg: psycopg.AsyncConnection[Any], job: str, state: str) -> None:
    """The outside world moves a job of its own (owner NULL)."""
    await pg.execute(
        "INSERT INTO plangate.jobs (job_id, state) VALUES (%s, %s) "
        "ON CONFLICT (job_id) WHERE owner IS NULL DO UPDATE SET state = EXCLUDED.state",
        (job, state),
    )


async def job_state(pg: psycopg.AsyncConnection[Any], job: str) -> str | None:
    row = await (await pg.execute(
        "SELECT state FROM plangate.jobs WHERE job_id = %s", (job,)
    )).fetchone()
    return None if row is None else str(row[0])


async def events(client: Any, run_id: str) -> list[Any]:
    return [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]


async def test_a_world_that_moves_after_the_check_is_caught_at_the_call(
    client, settings, world, pg
):
    tag = uuid.uuid4().hex[:8]
    gate, job = f"gate-{tag}", f"job-{tag}"
    await set_job(pg, gate, "open")
    real = tool_activities(world, settings.catalogue, settings.policy)["warehouse.run_sql"]
    moved = MovedBeforeCall(real, lambda: set_job(pg, gate, "closed"))
    async with running_worker(client, settings, {"warehouse.run_sql": moved.run}, world) as h:
        rep = await h.run({"goal": "mark behind a gate", "budget": {"replans_max": 0},
                           "steps": [mark(1, job, gate)]})
    # the workflow's read saw the gate open; the read at the call saw it closed: no write
    assert await job_state(pg, job) is None
    assert moved.calls == 1
    step = rep.step(1)
    assert step.state is not StepState.DONE and rep.status == "failed"
    # the workflow's first read: the skip check (the job not done) and the gate, open
    first = step.checks[0]
    assert first.phase is Phase.SKIP_PRE
    assert [r.outcome for r in first.results] == [Outcome.VIOLATED, Outcome.HOLDS]
    at_call = [c for c in step.checks if c.phase is Phase.AT_CALL]
    assert len(at_call) == 1 and at_call[0].results[0].outcome is Outcome.VIOLATED
    # after the refusal the workflow read the world again and found the gate closed
    assert step.checks[-1].phase is Phase.RE_EVALUATE
    assert step.checks[-1].results[-1].outcome is Outcome.VIOLATED
    assert [r.status for r in step.refusals] == [412]
    history = await events(client, rep.run_id)
    failed = [e.activity_task_failed_event_attributes.failure.application_failure_info
              for e in history if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    assert [f.type for f in failed] == ["precondition_failed"]  # refused once, never retried
    # the guard working, not a fault: the worker logs it without a traceback
    benign = ApplicationErrorCategory.APPLICATION_ERROR_CATEGORY_BENIGN
    assert [f.category for f in failed] == [benign]


async def test_without_the_check_at_the_call_the_same_move_is_written_through(
    client, settings, world, pg
):
    """The control: the same move, the same real activity, but the call carries no check (as
    as a call with no pre conditions would): the write goes through the closed gate."""
    tag = uuid.uuid4().hex[:8]
    gate, job = f"gate-{tag}", f"job-{tag}"
    await set_job(pg, gate, "open")
    real = tool_activities(world, settings.catalogue, settings.policy)["warehouse.run_sql"]

    async def unchecked(call: ToolCall) -> ToolResult:
        result: ToolResult = await real(call.model_copy(update={"check": []}))
        return result

    moved = MovedBeforeCall(unchecked, lambda: set_job(pg, gate, "closed"))
    async with running_worker(client, settings, {"warehouse.run_sql": moved.run}, world) as h:
        rep = await h.run({"goal": "mark behind a gate", "budget": {"replans_max": 0},
                           "steps": [mark(1, job, gate)]})
    assert await job_state(pg, job) == "done"
    assert await job_state(pg, gate) == "closed"
    assert rep.step(1).state is StepState.DONE


async def test_a_guarded_chain_reads_around_each_call_not_in_between(client, settings, pg):
    tag = uuid.uuid4().hex[:8]
    gate = f"gate-{tag}"
    await set_job(pg, gate, "open")
    steps = [mark(n, f"job-{tag}-{n}", gate, depends_on=[n - 1] if n > 1 else [])
             for n in range(1, 6)]
    async with running_worker(client, settings) as h:
        rep = await h.run({"goal": "chain", "budget": {"replans_max": 0}, "steps": steps})
    assert rep.status == "succeeded"
    for n in range(1, 6):
        assert await job_state(pg, f"job-{tag}-{n}") == "done"
    history = await events(client, rep.run_id)
    markers = [e for e in history if e.event_type == E.EVENT_TYPE_MARKER_RECORDED]
    # reads in the call are the baseline (baseline-38): the one patch a run asks is issue 50's
    # (it implies issue 48's and 47's)
    patch = [m.marker_recorded_event_attributes for m in markers
             if m.marker_recorded_event_attributes.marker_name == "core_patch"]
    assert [json.loads(p.details["patch-data"].payloads[0].data)["id"] for p in patch] == [
        INDEX_PATCH]
    local = [kind["activity_type"] for m in markers if (kind := local_activity(m)) is not None]
    # the runs index written as the run began and as it ended: none a step
    assert local.count(INDEX_ACTIVITY) == 2, local
    local = [t for t in local if t != INDEX_ACTIVITY]
    # the guards derived, with step 1's first read, in one local activity; every later read was
    # made inside a tool's activity; at the end, the run's windows kept for the report
    assert local == [GUARD_ACTIVITY, WINDOWS_ACTIVITY], local
    started = {e.activity_task_started_event_attributes.scheduled_event_id: e.event_time
               for e in history if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_STARTED}
    scheduled = [e.event_id for e in history
                 if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    assert len(scheduled) == 5
    for s, eid in zip(rep.steps, scheduled, strict=True):
        at_call = [c for c in s.checks if c.phase is Phase.AT_CALL]
        assert len(at_call) == 1 and at_call[0].results[0].outcome is Outcome.HOLDS
        post = [c for c in s.checks if c.phase is Phase.POST]
        assert len(post) == 1 and post[0].results[0].outcome is Outcome.HOLDS
        read = at_call[0].read_at
        assert read is not None and s.timings.tool_started_at is not None
        # the read the tool acted on was made inside its activity, after the server started it
        assert read >= started[eid].ToDatetime().replace(tzinfo=UTC)
        assert s.timings.precheck_read_at == read
        assert post[0].read_at is not None and post[0].read_at >= s.timings.tool_started_at
        assert s.check_to_use_ms == pytest.approx(
            (s.timings.tool_started_at - read).total_seconds() * 1000
        )


def _report(*outcomes: Outcome) -> ProbeReport:
    return ProbeReport(
        results=[ProbeResult(condition=Condition(probe="job_state", args={"job_id": f"j{i}"}),
                             outcome=o, detail=o.value) for i, o in enumerate(outcomes)],
        read_at=datetime.now(UTC), elapsed_ms=0.0,
    )


@pytest.mark.parametrize(("outcomes", "code"), [
    ((Outcome.HOLDS, Outcome.VIOLATED), "precondition_failed"),
    ((Outcome.UNKNOWN, Outcome.HOLDS), "probe_unknown"),  # cannot answer: never a pass
])
def test_the_call_is_refused_unless_every_condition_holds(outcomes, code):
    with pytest.raises(ToolError) as e:
        refuse_unless_held(_report(*outcomes))
    assert e.value.code == code and not e.value.may_have_acted
    assert ProbeReport.model_validate(e.value.data).results[1].outcome is outcomes[1]
    refuse_unless_held(_report(Outcome.HOLDS, Outcome.HOLDS))  # all hold: no refusal


class SlowProbes(ProbeActivities):
    """Reads that take longer than a call may wait for them (a system slow to answer)."""

    def __init__(self) -> None:
        self.asked = 0

    async def read(self, req: ProbeRequest) -> ProbeReport:
        self.asked += 1
        await asyncio.sleep(30)
        raise AssertionError("never reached")


async def test_a_slow_read_after_the_call_is_no_read_and_holds_the_answer_back_briefly():
    spec = TOOLS["warehouse.run_sql"]
    call = ToolCall(
        step=StepRef(run_id="r", plan_version=1, n=1, tool=spec.name), idempotency_key="k",
        after=[Condition(probe="job_state", args={"job_id": "j", "want": "done"})],
    )
    slow = SlowProbes()
    assert await asyncio.wait_for(read_after(slow, spec, call, {}, timeout_s=0.05), 5) is None
    assert slow.asked == 1
    # nothing asked after the call: nothing read
    bare = call.model_copy(update={"after": []})
    assert await read_after(slow, spec, bare, {}, timeout_s=0.05) is None and slow.asked == 1


async def test_a_pre_condition_first_read_at_the_call_fails_as_a_pre_check(client, settings, pg):
    """Step 2 follows step 1 alone: the read after step 1's call is also step 2's skip check,
    and step 2's gate is read only at its own call. Closed from the start, the gate refuses
    the call; the workflow reads again and answers as for any failed pre check: no 412, since
    the world did not move between a check and its use."""
    tag = uuid.uuid4().hex[:8]
    gate = f"gate-{tag}"
    await set_job(pg, gate, "closed")
    steps = [mark(1, f"job-{tag}-1"), mark(2, f"job-{tag}-2", gate, depends_on=[1])]
    async with running_worker(client, settings) as h:
        rep = await h.run({"goal": "gate closed", "budget": {"replans_max": 0}, "steps": steps})
    assert await job_state(pg, f"job-{tag}-1") == "done"
    assert await job_state(pg, f"job-{tag}-2") is None
    assert rep.status == "failed" and rep.failure is not None and rep.failure.step == 2
    step = rep.step(2)
    skip, at_call, pre = step.checks
    # the skip check, read in step 1's activity: the job not done yet; the gate not read
    assert skip.phase is Phase.SKIP_PRE and skip.read_at == rep.step(1).checks[-1].read_at
    assert [r.condition.probe for r in skip.results] == ["job_state"]
    assert skip.results[0].condition.args["job_id"] == f"job-{tag}-2"
    assert at_call.phase is Phase.AT_CALL and at_call.results[0].outcome is Outcome.VIOLATED
    assert pre.phase is Phase.PRE and pre.results[-1].outcome is Outcome.VIOLATED
    assert step.refusals == [] and rep.metrics.answers_412 == 0
    assert rep.failure.code == "precondition_unmet" and gate in rep.failure.detail
    history = await events(client, rep.run_id)
    failed = [e.activity_task_failed_event_attributes.failure.application_failure_info.type
              for e in history if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    assert failed == ["precondition_failed"]
