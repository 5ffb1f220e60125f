"""Nothing hangs: an unexpected error in workflow code fails the run with its report instead of
retrying the workflow task forever; a probe report that does not answer what was asked is no
pass; a plan whose steps can never start does not end "succeeded"."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType

from plangate.activities.catalogue import catalogue
from plangate.plans.guards import guard
from plangate.plans.model import Plan
from plangate.records.calls import Outcome, ProbeReport, ProbeRequest, ProbeResult
from plangate.records.interface import (
    GUARD_ACTIVITY,
    PROBE_ACTIVITY,
    PROPOSE_ACTIVITY,
    REVIEW_ACTIVITY,
)
from plangate.records.replan import ReplanProposal, ReplanRequest, Review, ReviewRequest
from plangate.testing import running_worker, scheduled
from tests.harness import DEMO_CATALOGUE, guards_alone


def failing_index(tag: str) -> dict[str, Any]:
    return {"goal": "index", "budget": {"replans_max": 1}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "create_index",
                  "params": {"name": f"ix_{tag}", "table": f"nope_{tag}", "column": "id"}}},
    ]}


class WavedThrough:
    """A re-planner and a review that let a broken plan through (a bug, simulated)."""

    def __init__(self, steps: list[dict[str, Any]]) -> None:
        self.steps = steps

    @property
    def doubles(self) -> dict[str, Any]:
        return {PROPOSE_ACTIVITY: self.propose, REVIEW_ACTIVITY: self.review}

    @activity.defn(name=PROPOSE_ACTIVITY)
    async def propose(self, req: ReplanRequest) -> ReplanProposal:
        plan = Plan.model_validate({"goal": req.goal, "steps": self.steps})
        return ReplanProposal(plan=plan, reason="waved through", backend="test")

    @activity.defn(name=REVIEW_ACTIVITY)
    async def review(self, req: ReviewRequest) -> Review:
        return Review(plan=guard(req.plan, catalogue(DEMO_CATALOGUE)))


async def task_failures(client: Any, run_id: str) -> int:
    n = 0
    async for e in client.get_workflow_handle(run_id).fetch_history_events():
        n += e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    return n


async def test_an_unexpected_error_fails_the_run_with_a_report(client, settings):
    bug = WavedThrough([{"n": 1, "tool": "warehouse.run_sql", "depends_on": [99],
                         "args": {"statement": "select_one"}}])
    async with running_worker(client, settings, bug.doubles) as h:
        rep = await h.run(failing_index(uuid.uuid4().hex[:8]))
    assert rep.status == "failed" and rep.plan_version == 2
    assert rep.failure is not None and rep.failure.code == "internal"
    assert "KeyError" in rep.failure.detail
    assert await task_failures(client, rep.run_id) == 0
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == 1


async def test_steps_that_can_never_start_do_not_succeed(client, settings):
    one = {"tool": "warehouse.run_sql", "args": {"statement": "select_one"}}
    bug = WavedThrough([{"n": 1, "depends_on": [2], **one}, {"n": 2, "depends_on": [1], **one}])
    async with running_worker(client, settings, bug.doubles) as h:
        rep = await h.run(failing_index(uuid.uuid4().hex[:8]))
    assert rep.status == "failed" and rep.failure is not None
    assert "could never start" in rep.failure.detail
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == 1


class Evasive:
    """A probe that answers about nothing: an empty report."""

    @activity.defn(name=PROBE_ACTIVITY)
    async def evaluate(self, req: ProbeRequest) -> ProbeReport:
        return ProbeReport(results=[], read_at=datetime.now(UTC), elapsed_ms=0.0)


class Answers:
    """A probe that answers a different question than it was asked."""

    @activity.defn(name=PROBE_ACTIVITY)
    async def evaluate(self, req: ProbeRequest) -> ProbeReport:
        other = req.conditions[0].model_copy(update={"probe": "table_rowcount"})
        return ProbeReport(
            results=[ProbeResult(condition=other, outcome=Outcome.HOLDS)],
            read_at=datetime.now(UTC), elapsed_ms=0.0,
        )


async def test_a_probe_report_that_answers_nothing_is_never_a_pass(client, settings):
    job = f"evasive-{uuid.uuid4().hex[:8]}"
    plan = {"goal": "mark", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
         "pre": [{"probe": "job_state", "job_id": f"{job}-before", "want": "done"}]},
    ]}
    for probe in (Evasive(), Answers()):
        doubles = {PROBE_ACTIVITY: probe.evaluate, GUARD_ACTIVITY: guards_alone(settings)}
        async with running_worker(client, settings, doubles) as h:
            rep = await h.run(plan)
        assert rep.status == "failed" and rep.step(1).state == "FAILED"
        assert rep.failure is not None and rep.failure.code == "probe_unknown"
        assert (await scheduled(client, rep.run_id)).get("warehouse.run_sql", 0) == 0
