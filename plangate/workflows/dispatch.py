"""EXECUTING: the tool call, and what its answer means for the step. A refusal (the world moved
under the step, a policy superseded) is read again before it is answered; a lost call may be
tried again; a call that acted goes on to VERIFYING."""

from __future__ import annotations

import asyncio

from temporalio import workflow

from plangate.plans.model import Condition
from plangate.records.calls import Outcome, ToolCall, ToolFailure
from plangate.records.codes import CODES
from plangate.records.policy import CEDAR_BUNDLE
from plangate.records.report import CancelOutcome, Phase, StepState
from plangate.workflows import bookkeeping, calls, guarding, reads, summaries
from plangate.workflows.probing import check_before, probe
from plangate.workflows.router import Answer, Kind, Refused, Route, route
from plangate.workflows.step import (
    Failed,
    Finished,
    Held,
    Owed,
    Park,
    Prepared,
    StepScope,
    Unknown,
)
from plangate.workflows.verification import verify

OUTAGE = "system_unavailable"  # a tool refusal that sent nothing: its systems are away
POLICY_REFUSALS = ("policy_denied", "approval_missing")  # the deployment's policies said no


async def execute(
    s: StepScope, base: Prepared, p: Prepared
) -> Finished | Failed | Unknown | Owed | Park:
    ctx = s.ctx
    s.set_state(StepState.EXECUTING)
    s.rep.timings.dispatched_at = workflow.now()
    check, after, lenient, successor = reads.at_call(s, p)
    call = ToolCall(
        step=p.ref, idempotency_key=p.key, on_behalf_of=ctx.on_behalf_of,
        policy_bundle=ctx.policy_bundle, check=check, after=after, after_lenient=lenient,
        approval_required=s.guard.approval, approval=p.grant,
        submission=ctx.submission,
    )
    try:
        summary = summaries.tool(s.n, ctx.version, s.step.tool, p.args)
        answer = await calls.call_tool(s.step.tool, call, s.effect, summary, ctx.tool_heartbeat)
    except asyncio.CancelledError:
        # the run was cancelled while the call was in flight (and has ended: the activity waits
        # for its cancellation to complete): what really happened, read by probes
        await _read_after_cancel(s, p)
        raise
    _mark(s, answer)
    match answer:
        case calls.CallFailed(failure=tf, refused=Refused.SUPERSEDED) if _cedar_superseded(tf):
            return await _redecided(s, answer, tf)
        case calls.CallFailed(failure=tf, refused=Refused.SUPERSEDED):
            # a moved version, a changed policy: read the world again, then re-plan; never a
            # blind retry. A refusal at the call carries what it read: when what failed there
            # had not been read before, it is the step's pre check failing (answered as such),
            # not the world moving between check and use.
            s.rep.attempts += tf.attempt
            refused = None
            if check and tf.code in reads.AT_CALL_REFUSALS:
                refused = reads.record_at_call(s, tf.data)
            unread = refused is not None and reads.first_read_at_call(s, refused)
            if not unread:
                bookkeeping.count_answer(ctx.report, s.rep, answer.refused, tf.status, tf.code)
            again = await check_before(s, base, Phase.PRE if unread else Phase.RE_EVALUATE)
            if not isinstance(again, Held):
                return again
            if unread:  # it held again a moment later: the world moves under the step
                bookkeeping.count_answer(ctx.report, s.rep, answer.refused, tf.status, tf.code)
            d = route(s.situation(Kind.TOOL_ERROR, refused=Refused.SUPERSEDED))
            return Failed(d, s.failure(tf.code, False, tf.detail, status=tf.status))
        case calls.CallFailed(failure=tf, refused=refused):
            s.rep.attempts += tf.attempt
            if check and tf.code in reads.AT_CALL_REFUSALS:
                reads.record_at_call(s, tf.data)
            bookkeeping.count_answer(ctx.report, s.rep, refused, tf.status, tf.code)
            d = route(s.situation(Kind.TOOL_ERROR, refused=refused, retryable=tf.retryable))
            if tf.code in POLICY_REFUSALS:  # the reason names the policy, not a lost authority
                d = Route(d.answer, f"{tf.code} (403): {tf.detail.removeprefix('not called: ')}"
                             [:300])
            if tf.code == OUTAGE and not tf.may_have_acted and ctx.kept:
                # it sent nothing: a system it needs did not answer (the effect ledger, the
                # seal's key). Waited for, as a probe's outage is (``machine``)
                d = route(s.situation(Kind.SYSTEM_DOWN, waits=True))
            failure = s.failure(tf.code, tf.retryable, tf.detail, status=tf.status)
            return Unknown(d, failure, d) if tf.may_have_acted else Failed(d, failure)
        case calls.CallLost(detail=detail):
            # certainly not done: a transient failure, tried again with the same key
            absent = route(s.situation(Kind.TOOL_ERROR, retryable=True))
            failure = s.failure("outcome_unknown", False, detail)
            if not s.effect.outcome_must_be_known:
                # A read or write whose call was lost (its worker died, or it timed out after
                # its attempts) is tried again like a transient fault, while the step has
                # attempts left: every attempt reads the world first, so a write that landed
                # is found done (skipped on its evidence, or its version-bound retry refused as
                # superseded and re-evaluated), and one that did not goes again with the
                # version its new pre probe observed.
                return Unknown(absent, failure, absent)
            # money and external: read back by idempotency key (``verification.read_back``)
            return Unknown(route(s.situation(Kind.OUTCOME_UNKNOWN)), failure, absent)
        case calls.Called(result=result):
            bookkeeping.record_call(ctx.report, s.rep, result, s.attempt)
            bookkeeping.record_ledger(s.rep, p.key, result.ledger)
            bookkeeping.record_receipt(ctx.report, s.rep, result.receipt)
            bookkeeping.record_result(ctx.report, s.rep, result.output)
            s.set_state(StepState.VERIFYING)
            first = None
            if after:
                first = reads.after_call(s, p, result.after, successor)
                if first is not None and first.all_hold:
                    return Finished(StepState.DONE, p.args, result.output)
                successor = None
            else:
                successor = reads.successor_read(s, result.output)
            verified = await verify(s, p, result.refs, successor, output=result.output, first=first)
            return verified or Finished(StepState.DONE, p.args, result.output)


def _cedar_superseded(tf: ToolFailure) -> bool:
    """A 412 because the deployment's Cedar policies changed (their bundle a digest): what is
    decided again. A bundle that is a label (``PLANGATE_POLICY_BUNDLE``) has no decision to
    make again: re-evaluated, then re-planned or halted, as before."""
    current = tf.data.get("current") if isinstance(tf.data, dict) else None
    return tf.code == "policy_superseded" and isinstance(current, str) \
        and current.startswith(CEDAR_BUNDLE)


def _mark(s: StepScope, answer: calls.CallAnswer) -> None:
    """Every answer the call got, counted by the staleness report: refused and failed calls
    as well as those that ran."""
    match answer:
        case calls.Called(result=r):
            bookkeeping.mark_call(s.rep, r.started_at, 200, "", r.attempt)
        case calls.CallFailed(failure=tf):
            bookkeeping.mark_call(s.rep, workflow.now(), tf.status or 0, tf.code, tf.attempt)
        case calls.CallLost():
            bookkeeping.mark_call(s.rep, workflow.now(), 0, "lost", 1)


async def _redecided(s: StepScope, answer: calls.CallFailed, tf: ToolFailure) -> Failed:
    """The policies in force are not those the version was decided under (412, nothing
    sent): the worker decides the version again under them (``guard.resolve``) and the step
    follows the new decision: forbidden, it halts (``policy_denied``); otherwise it is tried
    again with the new guards (a card where people are now asked for, none where they are no
    longer). A worker that decides under the same bundle again (a label, not Cedar's digest)
    changes nothing: re-planned or halted, as any 412."""
    ctx = s.ctx
    s.rep.attempts += tf.attempt
    bookkeeping.count_answer(ctx.report, s.rep, answer.refused, tf.status, tf.code)
    resolved = await guarding.resolve(ctx.guarded.plan, ctx.version, ctx, first_run=False)
    now = resolved.guards.get(s.n)
    if now is not None:
        s.rep.policy = now.policy
    if resolved.refusal is not None:
        code = resolved.refusal_code
        d = Route(Answer.HALT, f"re-decided under the policies in force: {code}")
        return Failed(d, s.failure(code, False, resolved.refusal, status=CODES[code].status))
    if resolved.policy_bundle == ctx.policy_bundle:
        d = route(s.situation(Kind.TOOL_ERROR, refused=Refused.SUPERSEDED))
        return Failed(d, s.failure(tf.code, False, tf.detail, status=tf.status))
    ctx.policy_bundle = resolved.policy_bundle
    ctx.guarded = resolved.guarded(ctx.guarded.plan)
    s.guard = ctx.guard(s.n)
    s.effect = s.guard.effect
    d = Route(Answer.RETRY, f"re-decided under policy bundle {ctx.policy_bundle}")
    return Failed(d, s.failure(tf.code, False, tf.detail, status=tf.status))


async def _read_after_cancel(s: StepScope, p: Prepared) -> None:
    """After a cancel reached a call in flight: did it act? Its post conditions (or, for money
    and external, its record by idempotency key) say done, not done, or unknown."""
    outcome, why = CancelOutcome.UNKNOWN, "no post condition to read"
    conds = p.post or ([Condition(probe="effect_recorded")] if s.guard.reads_by_key else [])
    if conds:
        answer = await probe(s, Phase.AFTER_CANCEL, p, conds, None)
        if isinstance(answer, Failed | Unknown):
            why = answer.failure.detail
        elif all(r.outcome is Outcome.HOLDS for r in answer.results):
            outcome, why = CancelOutcome.DONE, "its post conditions hold"
        else:
            first = next(r for r in answer.results if r.outcome is not Outcome.HOLDS)
            outcome, why = CancelOutcome.NOT_DONE, f"{first.condition.key()}: {first.detail}"
    s.rep.cancel_outcome = outcome
    s.rep.reason = f"cancelled while the call was in flight: {outcome} ({why})"
