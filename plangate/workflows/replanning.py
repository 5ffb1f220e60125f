"""After a plan version: the run succeeded, halted, or asks the replan child for the next plan
version, within the run's budget (never a loop: a spent budget halts with an escalation)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

from plangate.plans.guards import GuardedPlan
from plangate.records import options
from plangate.records.interface import REPLAN_WORKFLOW
from plangate.records.replan import ReplanBudget, ReplanOutcome, ReplanRequest
from plangate.records.report import (
    CompletedStep,
    FailureRecord,
    ReplanRecord,
    RunReport,
    RunStatus,
    StepState,
)
from plangate.workflows import bookkeeping, summaries
from plangate.workflows.context import VersionContext
from plangate.workflows.execution import VersionOutcome


async def next_plan(
    r: RunReport, ctx: VersionContext, outcome: VersionOutcome
) -> GuardedPlan | None:
    """The next plan version to run, or None when the run has ended (its status set)."""
    if outcome.failure is None:
        r.status = RunStatus.SUCCEEDED
        return None
    r.failure = outcome.failure
    if outcome.failed_state is StepState.HALTED:
        r.status = RunStatus.HALTED
        r.escalation = f"step {outcome.failure.step} halted: a person must look"
        return None
    return await _replan(r, ctx, outcome.failure)


async def _replan(r: RunReport, ctx: VersionContext, failure: FailureRecord) -> GuardedPlan | None:
    failed = ctx.step_report(failure.step)
    if r.replans_max == 0:  # the plan allows no recovery: the run has failed
        r.status = RunStatus.FAILED
        failed.state = StepState.FAILED
        return None
    remaining = [
        s for s in ctx.plan.steps if s.n == failure.step or ctx.state(s.n) is StepState.VOID
    ]
    last = ""
    while r.replans_used < r.replans_max:
        r.replans_used += 1
        req = ReplanRequest(
            goal=r.goal,
            completed=_completed_with_results(r),
            failure=failure,
            remaining=remaining,
            budget=ReplanBudget(replans_used=r.replans_used - 1, replans_max=r.replans_max),
            bound=ctx.bound,
            on_behalf_of=ctx.on_behalf_of,
            policy_bundle=ctx.policy_bundle,
        )
        out = await _ask(r, req, r.replans_used)
        r.replans.append(
            ReplanRecord(
                attempt=r.replans_used, after_step=failure.step, after_version=ctx.version,
                backend=out.backend, accepted=out.plan is not None, reason=out.reason,
                problems=out.problems,
            )
        )
        if out.plan is not None:
            # answered: its final state says so, not as if it were still being re-planned
            bookkeeping.set_state(failed, StepState.REPLANNED)
            return out.plan
        last = out.reason
        if out.final:
            break
    r.status = RunStatus.HALTED
    failed.state = StepState.HALTED
    r.escalation = (
        f"no route around step {failure.step} ({failure.code}) after "
        f"{r.replans_used} of {r.replans_max} replans: {last}"
    )
    return None


def _completed_with_results(r: RunReport) -> list[CompletedStep]:
    """The completed steps with their bounded results, which the report keeps per step."""
    out = []
    for c in r.completed:
        rep = r.step(c.n, c.plan_version)
        kept = {"result": rep.result, "result_digest": rep.result_digest}
        out.append(c.model_copy(update=kept))
    return out


async def _ask(r: RunReport, req: ReplanRequest, attempt: int) -> ReplanOutcome:
    f = req.failure
    summary = summaries.replan(attempt, r.run_id, f.step, f.plan_version, f.code)
    try:
        out: ReplanOutcome = await workflow.execute_child_workflow(
            REPLAN_WORKFLOW,
            req,
            id=f"{r.run_id}/replan-{attempt}",
            result_type=ReplanOutcome,
            execution_timeout=options.REPLAN_EXECUTION_TIMEOUT,
            static_summary=summary,
        )
    except ChildWorkflowError as e:
        return ReplanOutcome(reason=f"the replan workflow failed: {e.cause or e}")
    return out
