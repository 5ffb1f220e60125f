"""A step whose arguments an earlier step binds (``${owed}``) is decided by the deployment's
policies once they are bound, before its check's card and its call (``guard.decide``, a local
activity): its version's guards decided it as written, with the unbound arguments left out, so
an amount over a people threshold never asked for its card and the call refused it
(``approval_missing``). The call decides again, from what it verifies."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import FailureError

from plangate.plans import bindings
from plangate.records import options
from plangate.records.interface import DECIDE_ACTIVITY
from plangate.records.run import Decided, DecideRequest
from plangate.workflows import summaries
from plangate.workflows.router import Kind, Refused, Route, route
from plangate.workflows.step import Failed, Prepared, StepScope

PEOPLE, FORBID = "permit_with_people", "forbid"


def waits_on_binding(s: StepScope) -> bool:
    """Decided by Cedar policies (its guards carry their decision) with an argument that was
    not bound when they decided it."""
    return s.guard.policy is not None and s.ctx.decides_bound and any(
        any(bindings.references(v)) for v in s.step.args.values()
    )


async def decide_bound(s: StepScope, p: Prepared) -> Failed | None:
    """The step's guard as the policies decide its bound call: a card where they ask people
    (``s.guard.approval``), a halt naming the policy where they forbid it; None to go on."""
    ctx = s.ctx
    req = DecideRequest(
        workflow_id=workflow.info().workflow_id, plan_version=ctx.version, step=s.n,
        tool=s.step.tool, effect=s.effect, args=p.args, on_behalf_of=ctx.on_behalf_of,
        approval_asked=s.guard.approval,
    )
    try:
        got: Decided = await workflow.execute_local_activity(
            DECIDE_ACTIVITY, req, result_type=Decided,
            start_to_close_timeout=options.GUARD_TIMEOUT, retry_policy=options.GUARD_RETRY,
            summary=summaries.bound_decision(s.n, ctx.version, s.step.tool),
        )
    except FailureError as e:  # a local activity's failure arrives bare (or timed out)
        # an early word, never the last: the call decides (and refuses) itself
        workflow.logger.warning("step %s was not decided before its call: %s", s.n, e)
        return None
    mark = got.policy
    if mark is None:  # no policies, or none readable now: the call decides alone
        return None
    people = mark.enforced and mark.outcome == PEOPLE
    s.guard = s.guard.model_copy(update={"policy": mark, "approval": s.guard.approval or people})
    s.rep.policy = mark
    if not (mark.enforced and mark.outcome == FORBID):
        return None
    named = ", ".join(mark.policies) or "no policy permits it (default deny)"
    why = (f"not called: {s.step.tool} with its bound arguments is forbidden by the "
           f"deployment's policy ({named}, bundle {mark.bundle}): {mark.reason}")[:500]
    d = route(s.situation(Kind.TOOL_ERROR, refused=Refused.REVOKED))
    return Failed(Route(d.answer, f"forbidden by the deployment's policy ({named})"),
                  s.coded("policy_denied", why))
