"""What every step of one plan version shares: the plan, bindings, step states, the report."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import JsonValue
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.tools.registry import conditions_for
    from plans import bindings
    from plans.model import Condition, Plan, Step
    from probes import PROBES
    from records.report import (
        RESULTS_BUDGET,
        RunReport,
        StepReport,
        StepState,
        Transition,
        summarize,
    )


@dataclass
class VersionContext:
    run_id: str
    plan: Plan
    version: int
    plan_made_at: datetime
    report: RunReport
    # Values bound by completed steps of every version so far.
    bound: dict[str, JsonValue] = field(default_factory=dict)
    # condition key -> the step (n) whose verified post condition established it.
    verified: dict[str, int] = field(default_factory=dict)

    def step_report(self, n: int) -> StepReport:
        return self.report.step(n, self.version)

    def set_state(self, n: int, state: StepState) -> None:
        rep = self.step_report(n)
        rep.state = state
        rep.transitions.append(Transition(state=state, at=workflow.now()))

    def state(self, n: int) -> StepState:
        return self.step_report(n).state

    def idempotency_key(self, n: int) -> str:
        """Stable across retries, worker crashes and replays; unique per run (a reused workflow
        id gets a new first execution) and per plan version; at most about 90 characters."""
        if not workflow.patched("run-scoped-keys"):
            return f"{self.run_id}/v{self.version}/{n}"
        info = workflow.info()
        tag = hashlib.sha256(f"{info.workflow_id}/{info.first_execution_run_id}".encode())
        return f"{self.run_id[:48]}~{tag.hexdigest()[:16]}/v{self.version}/{n}"

    def record_result(self, rep: StepReport, output: dict[str, JsonValue]) -> None:
        """Keep a bounded view of a tool's result in the report: the whole result while it is
        small and the run's budget for results lasts, else its size, SHA-256 and a preview.
        The full result is stored once, in the history, as the activity's result."""
        summary = summarize(output, self.report.metrics.result_bytes < RESULTS_BUDGET)
        rep.result = summary.value
        rep.result_digest = summary.digest
        self.report.metrics.result_bytes += summary.kept

    def resolve_conditions(self, conds: list[Condition], where: str) -> list[Condition]:
        return [
            Condition(
                probe=c.probe,
                args=bindings.resolve(c.args, self.bound, f"{where}[{i}]"),
                wait=c.wait,
            )
            for i, c in enumerate(conds)
        ]

    def promised_post(self, step: Step) -> list[Condition]:
        """The shared-world claims a step will be held to, as far as they can be bound now.
        Field probes are left out: they read the step's own record, so no other step can owe
        or destroy the same claim by name."""
        try:
            args = bindings.resolve(step.args, self.bound)
            plan_post = self.resolve_conditions(step.post, "post")
        except bindings.BindingError:
            return []
        return [
            c
            for c in conditions_for(step, "post", args, plan_post)
            if c.probe in PROBES and PROBES[c.probe].system != "record"
        ]

    def descendants(self, n: int) -> set[int]:
        out: set[int] = set()
        frontier = {n}
        while frontier:
            frontier = {s.n for s in self.plan.steps if set(s.depends_on) & frontier} - out
            out |= frontier
        return out

    def unfinished_owner(self, cond: Condition, asking: int) -> int | None:
        """A step of this plan, not finished yet and not waiting on the asking step, whose
        post condition is this very claim."""
        later = self.descendants(asking)
        for s in self.plan.steps:
            if s.n == asking or s.n in later or self.state(s.n).final:
                continue
            if any(p.key() == cond.key() for p in self.promised_post(s)):
                return s.n
        return None
