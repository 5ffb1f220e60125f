"""A standing grant in place of a card (``records.grants``): where a step's call needs a person,
the run first asks its worker whether a grant covers this exact call (``grant.cover``, a local
activity: one marker in the history); covered, the call goes without a card, a use of the grant
reserved for its key, and the step's report names the grant. Behind ``GRANTS_PATCH``: histories
recorded before it replay as they ran (a card, never asked)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import FailureError

from plangate.records import options
from plangate.records.grants import Cover, CoverRequest
from plangate.records.interface import GRANT_COVER_ACTIVITY
from plangate.records.report import GrantMark
from plangate.workflows.step import Prepared, StepScope

GRANTS_PATCH = "plangate-standing-grants"


async def covered(s: StepScope, p: Prepared) -> GrantMark | None:
    """The grant that covers the call ``p`` (a use reserved for its key), or None: a card.
    Never where the run acts for nobody (a grant is a principal's) or the policy asks more
    than one approver (a grant is one approver's word)."""
    ctx = s.ctx
    policy = s.guard.policy
    if ctx.on_behalf_of is None or (policy is not None and policy.approvers > 1):
        return None
    if not workflow.patched(GRANTS_PATCH):
        return None
    req = CoverRequest(plan_version=ctx.version, step=s.n, tool=s.step.tool, args=p.args,
                       on_behalf_of=ctx.on_behalf_of, idempotency_key=p.key,
                       submitter=ctx.submission.submitter if ctx.submission else None)
    try:
        got: Cover = await workflow.execute_local_activity(
            GRANT_COVER_ACTIVITY, req, result_type=Cover,
            start_to_close_timeout=options.GUARD_TIMEOUT, retry_policy=options.GUARD_RETRY,
            summary=f"step {s.n} v{ctx.version}: a standing grant for {s.step.tool}?",
        )
    except FailureError as e:  # not decided: a card, as without grants
        workflow.logger.warning("step %s: grants not asked: %s", s.n, e)
        return None
    if got.grant_id is None or got.approver is None:
        return None
    return GrantMark(id=got.grant_id, approver=got.approver)
