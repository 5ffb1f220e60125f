"""The replan child workflow: asks the re-planner, has its plan reviewed (``check --strict`` and
the mandate of a re-plan, ``replanner.review``), and hands back a plan the parent may run, or
the reason there is none. Never executes anything itself."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from plangate.checking import problems
    from plans.model import Plan, Step
    from records.replan import ReplanOutcome, ReplanProposal, ReplanRequest
    from replanner.review import Review, ReviewRequest

PROPOSE_TIMEOUT = timedelta(minutes=3)
PROPOSE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
)
REVIEW_TIMEOUT = timedelta(seconds=30)
REVIEW_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
# The whole child, the model's retries included: a re-plan never holds a run forever.
EXECUTION_TIMEOUT = timedelta(minutes=15)


def _shape(steps: list[Step]) -> list[tuple[str, str]]:
    # What a plan does, without its numbering: tools, arguments and conditions, in order.
    return [
        (s.tool, s.model_dump_json(include={"args", "pre", "post", "effect", "binds"}))
        for s in steps
    ]


def same_as_remaining(plan: Plan, remaining: list[Step]) -> bool:
    return _shape(plan.steps) == _shape(remaining)


@workflow.defn(name="Replan")
class ReplanWorkflow:
    @workflow.run
    async def run(self, req: ReplanRequest) -> ReplanOutcome:
        try:
            proposal: ReplanProposal = await workflow.execute_activity(
                "replanner.propose",
                req,
                result_type=ReplanProposal,
                start_to_close_timeout=PROPOSE_TIMEOUT,
                retry_policy=PROPOSE_RETRY,
            )
        except ActivityError as e:
            return ReplanOutcome(reason=f"the re-planner gave no answer: {e.cause or e}")
        out = ReplanOutcome(backend=proposal.backend, reason=proposal.reason, final=proposal.final)
        if proposal.plan is None:
            return out
        if workflow.patched("review-activity"):
            # Local: short, read-only, safe to repeat, and no server round trip to schedule it.
            review: Review = await workflow.execute_local_activity(
                "replanner.review",
                ReviewRequest(plan=proposal.plan, request=req),
                result_type=Review,
                start_to_close_timeout=REVIEW_TIMEOUT,
                retry_policy=REVIEW_RETRY,
            )
            found = review.problems
        else:  # runs started before proposals were reviewed as `check --strict` with a mandate
            found = problems(proposal.plan, None, bound=set(req.bound))
        if found:
            out.reason = f"the proposed plan was rejected ({len(found)} problems)"
            out.problems = found
            return out
        if same_as_remaining(proposal.plan, req.remaining):
            out.reason = "the proposed plan is the failed remainder again: no progress"
            return out
        out.plan = proposal.plan
        return out
