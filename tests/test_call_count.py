"""Seed 001's call-count test, ported: a final failure at step 3 of 6 voids steps 4-6."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from temporalio import activity

from plangate.activities.tool_activity import as_application_error
from plangate.records.calls import ToolCall, ToolResult
from plangate.testing import attempts, running_worker, scheduled
from plangate.world.errors import ToolError


class ScriptedSql:
    """Stands in for warehouse.run_sql: counts calls per step, fails as scripted."""

    def __init__(self, failures: dict[int, list[str]]) -> None:
        self.failures = failures  # step n -> codes to raise on successive calls
        self.calls: Counter[int] = Counter()

    @activity.defn(name="warehouse.run_sql")
    async def run(self, call: ToolCall) -> ToolResult:
        n = call.step.n
        self.calls[n] += 1
        script = self.failures.get(n, [])
        if len(script) >= self.calls[n]:
            raise as_application_error(ToolError(script[self.calls[n] - 1], f"step {n}"))
        now = datetime.now(UTC)
        return ToolResult(output={"step": n}, started_at=now, finished_at=now,
                          attempt=activity.info().attempt)


def six_steps() -> dict[str, Any]:
    return {
        "goal": "close out acct_3319f",
        "budget": {"replans_max": 0},
        "steps": [
            {"n": n, "tool": "warehouse.run_sql", "depends_on": [n - 1] if n > 1 else [],
             "args": {"statement": "select_one"}}
            for n in range(1, 7)
        ],
    }


async def test_permanent_failure_at_step_3_voids_the_rest(client, settings):
    tool = ScriptedSql({3: ["record_archived"]})
    async with running_worker(client, settings, {"warehouse.run_sql": tool.run}) as h:
        rep = await h.run(six_steps())
    assert [tool.calls[n] for n in (4, 5, 6)] == [0, 0, 0]
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == 3
    assert [c.n for c in rep.completed] == [1, 2]
    assert rep.failure is not None
    assert (rep.failure.step, rep.failure.code, rep.failure.retryable) == (3, "record_archived",
                                                                           False)
    assert rep.status == "failed"
    assert [s.state for s in rep.steps[3:]] == ["VOID"] * 3
    assert tool.calls[3] == 1
    assert (await attempts(client, rep.run_id))["warehouse.run_sql"] == [1, 1, 1]


async def test_retryable_failure_is_retried_per_policy(client, settings):
    tool = ScriptedSql({2: ["unavailable", "unavailable"]})
    async with running_worker(client, settings, {"warehouse.run_sql": tool.run}) as h:
        rep = await h.run(six_steps())
    assert rep.status == "succeeded"
    assert tool.calls[2] == 3 and all(tool.calls[n] == 1 for n in (1, 3, 4, 5, 6))
    assert (await attempts(client, rep.run_id))["warehouse.run_sql"] == [1, 3, 1, 1, 1, 1]
    assert rep.step(2).attempts == 3


async def test_retryable_failure_that_persists_is_final(client, settings):
    tool = ScriptedSql({3: ["unavailable"] * 20})
    async with running_worker(client, settings, {"warehouse.run_sql": tool.run}) as h:
        rep = await h.run(six_steps())
    assert rep.status == "failed"
    assert rep.failure is not None and rep.failure.code == "unavailable"
    assert rep.failure.retryable is True
    assert sum(tool.calls[n] for n in (4, 5, 6)) == 0
    # Temporal's policy (3 attempts) inside each of the workflow's 3 tries of the whole step
    assert tool.calls[3] == 9
