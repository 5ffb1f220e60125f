"""VERIFYING: every post condition on a fresh read (with ``wait``, read again on its schedule
up to its deadline); an unknown money or external outcome read back by idempotency key; a wait
an earlier run of the chain parked, going on."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from pydantic import JsonValue
from temporalio import workflow

from plangate.plans.model import Condition
from plangate.records.calls import Outcome, ProbeReport
from plangate.records.read_ahead import ReadAhead
from plangate.records.report import Answer, Attribution, Phase, StepState
from plangate.records.run import Parked, ParkedAt
from plangate.workflows import bookkeeping, reads, summaries
from plangate.workflows.probing import probe
from plangate.workflows.router import Kind, route
from plangate.workflows.step import (
    Attempt,
    Failed,
    Finished,
    Park,
    Prepared,
    StepScope,
    Unknown,
)


async def verify(
    s: StepScope,
    p: Prepared,
    refs: dict[str, JsonValue] | None,
    successor: ReadAhead | None = None,
    *,
    output: dict[str, JsonValue] | None = None,
    read_back: bool = False,
    resume: Parked | None = None,
    first: ProbeReport | None = None,
) -> Failed | Unknown | Park | None:
    """None when every post condition holds. ``successor``: the next step's first read, fused
    into the first of these reads. ``output`` and ``read_back``: what a wait parked here carries
    into the next run; ``resume``: such a wait, going on. ``first``: the first read, made (and
    recorded) in the tool's activity right after the call."""
    if not p.post:
        return None
    if successor is not None:
        fused = await reads.fused_post(s, p, refs, successor)
        if fused is not None:
            return None
    waits = [c.wait for c in p.post if c.wait is not None]
    timeout = timedelta(seconds=max((w.timeout_s for w in waits), default=0))
    interval = timedelta(seconds=min((w.interval_s for w in waits), default=60))
    count = resume.reads if resume is not None else 0
    parked = s.parked(
        ParkedAt.POST_WAIT, args=p.args, refs=refs, output=output, read_back=read_back
    )
    if resume is not None:
        if resume.resume_at is not None:
            summary = summaries.resume(s.n, s.ctx.version, resume.resume_at - workflow.now())
            park = await s.pause(
                resume.resume_at, parked.model_copy(update={"reads": count}), summary
            )
            if park is not None:
                return park
        s.set_state(StepState.VERIFYING, fold=count >= 2)
    while True:
        # a wait's third and later reads are folded into one record (the report stays small)
        answer: ProbeReport | Failed | Unknown
        if first is not None:
            answer, first = first, None
        else:
            answer = await probe(s, Phase.POST, p, p.post, refs, fold=count >= 2)
        count += 1
        if isinstance(answer, Failed | Unknown):
            return answer
        failed = [r for r in answer.results if r.outcome is not Outcome.HOLDS]
        if not failed:
            return None
        # reads are due at 0, 1, 2, ... intervals after the first, up to and including the
        # deadline (the time the reads took never costs the last one): a wait of 3600 s read
        # every 60 s reads 61 times
        in_time = bool(waits) and interval * count <= timeout
        d = route(s.situation(Kind.POST_VIOLATED, waits=in_time))
        if d.answer is not Answer.WAIT:
            unmet = failed[0]
            return Failed(
                d,
                s.failure(
                    "postcondition_unmet", False, f"{unmet.condition.key()}: {unmet.detail}",
                    attribution=Attribution.NOT_ESTABLISHED,
                ),
            )
        s.decide(d, again=count > 1)  # a wait is one answer, however many reads
        s.set_state(StepState.WAITING, fold=count >= 2)
        due = workflow.now() + interval
        most = int(timeout / interval) + 1 if interval else count
        summary = summaries.read_again(s.n, s.ctx.version, interval, count, most)
        park = await s.pause(due, parked.model_copy(update={"reads": count}), summary)
        if park is not None:
            return park
        s.set_state(StepState.VERIFYING, fold=count >= 2)


async def read_back(s: StepScope, p: Prepared, unknown: Unknown) -> Finished | Failed | Park:
    """A money or external call whose outcome is unknown: read the world by idempotency key
    before anything else. Found: the call acted, and its post conditions judge it. Certainly
    absent: it did not act, so it may be tried again with the same key. Still unknown: halt.
    Never a new key while the first call's effect may exist."""
    s.rep.reason = f"{unknown.failure.detail}: reading the world by idempotency key"
    answer = await probe(s, Phase.READ_BACK, p, [Condition(probe="effect_recorded")], None)
    if isinstance(answer, Failed | Unknown):
        return halt_unknown(s, unknown, answer.failure.detail)
    found = answer.results[0]
    if found.outcome is not Outcome.HOLDS:
        # Nothing was done under this key: the failure is what the tool said it was.
        detail = f"{unknown.failure.detail}; nothing was recorded under its idempotency key"
        return Failed(unknown.if_absent, unknown.failure.model_copy(update={"detail": detail}))
    output = found.observed if isinstance(found.observed, dict) else {}
    bookkeeping.record_result(s.ctx.report, s.rep, output)
    s.set_state(StepState.VERIFYING)
    match await verify(s, p, None, output=output, read_back=True):
        case Unknown(failure=again):
            return halt_unknown(s, unknown, again.detail)
        case Failed() | Park() as stopped:
            return stopped
    return Finished(StepState.DONE, p.args, output)


async def resume_wait(s: StepScope, base: Prepared, parked: Parked) -> Attempt:
    """A post wait an earlier run of the chain parked: the call acted (with ``args``), and its
    post conditions are read again on their schedule, counted from its first read."""
    args = parked.args if parked.args is not None else base.args
    p = replace(base, args=args, ref=s.ref(args))
    verified = await verify(
        s, p, parked.refs, output=parked.output, read_back=parked.read_back, resume=parked
    )
    match verified:
        case Unknown() if parked.read_back:  # as in ``read_back``
            return halt_unknown(s, verified, verified.failure.detail)
        case Unknown() if s.effect.outcome_must_be_known:  # as after a call (``machine``)
            return await read_back(s, p, verified)
        case None:
            return Finished(StepState.DONE, p.args, parked.output)
    return verified


def halt_unknown(s: StepScope, unknown: Unknown, why: str) -> Failed:
    d = route(s.situation(Kind.OUTCOME_UNKNOWN))
    detail = f"{unknown.failure.detail}; the world could not tell: {why}"
    f = unknown.failure.model_copy(
        update={"code": "outcome_unknown", "retryable": False, "detail": detail}
    )
    return Failed(d, f)
