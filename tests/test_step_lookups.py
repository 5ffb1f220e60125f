"""A version's steps find their entries of the run report (their own, and the states of the
steps they wait on) once, not by reading the report's list at every turn (issue 50): a chain
of n steps asked ``RunReport.step`` about 3n times a step, n^2 lookups a run, before."""

from __future__ import annotations

from typing import Any

from plangate.records.report import RunReport, StepReport
from plangate.testing import running_worker

STEPS = 12


async def test_a_chain_finds_each_steps_report_entry_once(client, settings, monkeypatch):
    looked: list[tuple[int, int | None]] = []
    reads_the_list = RunReport.step

    def step(self: RunReport, n: int, plan_version: int | None = None) -> StepReport:
        looked.append((n, plan_version))
        return reads_the_list(self, n, plan_version)

    monkeypatch.setattr(RunReport, "step", step)
    plan: dict[str, Any] = {"goal": "a chain", "budget": {"replans_max": 0}, "steps": [
        {"n": n, "tool": "warehouse.run_sql", "args": {"statement": "select_one"},
         "depends_on": [n - 1] if n > 1 else []}
        for n in range(1, STEPS + 1)]}
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    assert rep.status == "succeeded", rep.failure
    assert [(s.n, s.state) for s in rep.steps] == [(n, "DONE") for n in range(1, STEPS + 1)]
    # each step's entry shown twice (as the run begins, then as the version does) and found
    # once by the version; the states a step waits on, from what was found
    assert len(looked) <= 3 * STEPS, len(looked)
    assert {n for n, _ in looked} == set(range(1, STEPS + 1))
