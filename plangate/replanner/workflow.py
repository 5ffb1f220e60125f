"""The replan child workflow: asks the re-planner, has its plan reviewed (``check --strict``,
the mandate of a re-plan, its guards resolved: ``replanner.review``), and hands back a plan the
parent may run, or the reason there is none. Never executes anything itself; calls activities
by name and keeps only pure comparisons here."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from plangate.plans.model import Plan, Step
from plangate.records import options
from plangate.records.interface import PROPOSE_ACTIVITY, REPLAN_WORKFLOW, REVIEW_ACTIVITY
from plangate.records.replan import (
    ReplanOutcome,
    ReplanProposal,
    ReplanRequest,
    Review,
    ReviewRequest,
)


def _shape(steps: list[Step]) -> list[tuple[str, str]]:
    # What a plan does, without its numbering: tools, arguments and conditions, in order.
    return [
        (s.tool, s.model_dump_json(include={"args", "pre", "post", "effect", "binds"}))
        for s in steps
    ]


def same_as_remaining(plan: Plan, remaining: list[Step]) -> bool:
    return _shape(plan.steps) == _shape(remaining)


@workflow.defn(name=REPLAN_WORKFLOW)
class ReplanWorkflow:
    @workflow.run
    async def run(self, req: ReplanRequest) -> ReplanOutcome:
        try:
            # Local: no server round trip to schedule it or to wake the workflow after it (a
            # model's answer can take minutes; the worker keeps the task alive).
            proposal: ReplanProposal = await workflow.execute_local_activity(
                PROPOSE_ACTIVITY,
                req,
                result_type=ReplanProposal,
                start_to_close_timeout=options.PROPOSE_TIMEOUT,
                retry_policy=options.PROPOSE_RETRY,
            )
        except (ActivityError, ApplicationError) as e:
            # The endpoint did not answer, after the activity's own retries: asking again at
            # once, for the rest of the budget, would only loop. The run halts and says why.
            cause = e.cause if isinstance(e, ActivityError) else e
            return ReplanOutcome(reason=f"the re-planner gave no answer: {cause or e}", final=True)
        out = ReplanOutcome(backend=proposal.backend, reason=proposal.reason, final=proposal.final)
        if proposal.plan is None:
            return out
        # Local: short, read-only, safe to repeat, and no server round trip to schedule it.
        review: Review = await workflow.execute_local_activity(
            REVIEW_ACTIVITY,
            ReviewRequest(plan=proposal.plan, request=req),
            result_type=Review,
            start_to_close_timeout=options.REVIEW_TIMEOUT,
            retry_policy=options.REVIEW_RETRY,
        )
        if review.problems or review.plan is None:
            out.reason = f"the proposed plan was rejected ({len(review.problems)} problems)"
            out.problems = review.problems
            return out
        if same_as_remaining(proposal.plan, req.remaining):
            out.reason = "the proposed plan is the failed remainder again: no progress"
            return out
        out.plan = review.plan
        return out
