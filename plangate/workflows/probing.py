"""PROBING: the step reads the world before its call (is its effect in place already, do its
pre conditions hold), waits for a system that does not answer, and for a concurrent step that
owes one of its pre conditions. Every read goes through ``probe``."""

from __future__ import annotations

from datetime import timedelta

from pydantic import JsonValue
from temporalio import workflow

from plangate.plans.model import Condition
from plangate.records import options
from plangate.records.calls import Outcome, ProbeReport, ProbeRequest, ProbeResult
from plangate.records.report import Answer, Attribution, Phase, StepState
from plangate.records.run import ParkedAt
from plangate.workflows import bookkeeping, calls, reads, summaries
from plangate.workflows.router import Kind, route
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


async def probe(
    s: StepScope,
    phase: Phase,
    p: Prepared,
    conds: list[Condition],
    refs: dict[str, JsonValue] | None,
    lenient: list[str] | None = None,
    fold: bool = False,
) -> ProbeReport | Failed | Unknown:
    """Read ``conds``. A system that does not answer at all is waited for, read again and again
    (``options.outage_backoff``), up to the run's outage patience; then the step halts: a new
    plan would meet the same outage, so none is asked for. Not after a cancel: whoever
    cancelled is not kept waiting."""
    ctx = s.ctx
    req = ProbeRequest(
        step=p.ref, conditions=conds, idempotency_key=p.key, output=refs, lenient=lenient or [],
    )
    summary = summaries.probe(phase, s.n, ctx.version, conds)
    began, outage_reads = workflow.now(), 0
    while True:
        answer = await calls.probe(req, summary)
        record = fold or outage_reads >= 2
        if isinstance(answer, calls.Probed):
            bookkeeping.record_check(ctx.report, s.rep, phase, s.attempt, answer.report, record)
            return answer.report
        if answer.report is not None:
            bookkeeping.record_check(ctx.report, s.rep, phase, s.attempt, answer.report, record)
        if answer.code != "system_unavailable" or phase is Phase.AFTER_CANCEL:
            break
        waited = workflow.now() - began
        if waited >= ctx.outage_patience:
            d = route(s.situation(Kind.SYSTEM_DOWN))
            why = f"{answer.detail} (no answer for {waited.total_seconds():.0f}s)"
            failure = s.coded("system_unavailable", why)
            return Unknown(d, failure, d) if phase is Phase.POST else Failed(d, failure)
        outage_reads += 1
        await _wait_for_system(s, answer, outage_reads, ctx.outage_patience - waited)
    if answer.code == "bad_arguments":  # bound values that do not fit: permanent
        d = route(s.situation(Kind.TOOL_ERROR))
        return Failed(d, s.coded("bad_arguments", answer.detail))
    d = route(s.situation(Kind.PROBE_UNKNOWN))
    failure = s.coded("probe_unknown", answer.detail)
    if phase is Phase.POST:  # the call ran: whether it acted, nobody can tell now
        return Unknown(d, failure, d)
    return Failed(d, failure)


async def _wait_for_system(
    s: StepScope, answer: calls.ProbeFailed, reads: int, left: timedelta
) -> None:
    """WAITING while the systems a read needs are down; then the state it was in."""
    report = answer.report
    down = sorted({
        s.ctx.guarded.systems.get(r.condition.probe, "record")
        for r in (report.unknown if report else [])
    })
    was = s.rep.state
    s.decide(route(s.situation(Kind.SYSTEM_DOWN, waits=True)), again=reads > 1)
    s.rep.reason = (
        f"{', '.join(down) or 'a system'} did not answer: waiting for it "
        f"({reads} read(s) so far, {left.total_seconds():.0f}s of patience left)"
    )
    s.set_state(StepState.WAITING, fold=reads >= 2)
    delay = min(options.outage_backoff(reads), left)
    await workflow.sleep(delay, summary=summaries.outage(s.n, s.ctx.version, down, delay, reads))
    s.set_state(was, fold=reads >= 2)


async def check_before(
    s: StepScope, p: Prepared, again: Phase | None = None
) -> Held | Finished | Failed | Owed:
    """Read the world before the call: is the step's effect already in place (skip), do its
    pre conditions hold. ``again``: the phase of a second read (after an approval, after a
    refusal at the call), recorded as such."""
    ctx = s.ctx
    s.set_state(StepState.PROBING)
    ahead = ctx.prefetched.pop(s.n, None) if again is None else None
    # a read ahead in which a probe could not answer is no read: the step reads (and waits) itself
    if ahead is None or ahead.report is None or ahead.report.unknown:
        ahead = reads.own(s, p)
    s.read_at_call_only = set(ahead.at_call)
    if not ahead.conditions:
        return Held([])
    phase = again or (Phase.SKIP_PRE if ahead.skip else Phase.PRE)
    answer: ProbeReport | Failed | Unknown
    if ahead.report is not None:  # read ahead of the step, nothing having run in between
        answer = ahead.report
        bookkeeping.record_check(ctx.report, s.rep, phase, s.attempt, answer)
    else:
        answer = await probe(s, phase, p, ahead.conditions, None, lenient=ahead.lenient)
    if isinstance(answer, Failed | Unknown):
        return Failed(answer.decision, answer.failure)
    s.rep.timings.precheck_read_at = answer.read_at
    if ahead.skip and all(r.outcome is Outcome.HOLDS for r in answer.results[: ahead.skip]):
        s.decide(route(s.situation(Kind.ALREADY_DONE)))
        return Finished(StepState.SKIPPED, p.args)
    pre = answer.results[ahead.skip :]
    return _judge_pre(s, pre) or Held(pre)


def _judge_pre(s: StepScope, results: list[ProbeResult]) -> Failed | Owed | None:
    failed = [r for r in results if r.outcome is not Outcome.HOLDS]
    if not failed:
        return None
    first = failed[0]
    owner = s.ctx.unfinished_owner(first.condition, s.n)
    d = route(s.situation(Kind.PRE_VIOLATED, owed=owner is not None))
    if d.answer is Answer.WAIT and owner is not None:
        return Owed(d, owner, first.condition)
    by = s.ctx.verified.get(first.condition.key())
    return Failed(
        d,
        s.failure(
            "precondition_unmet", False, f"{first.condition.key()}: {first.detail}",
            attribution=Attribution.DESTROYED if by is not None else None, established_by=by,
        ),
    )


async def wait_for_owner(s: StepScope, owed: Owed) -> Failed | Park | None:
    """Wait for the owner of a missing state to finish; then (None) the step probes again."""
    ctx = s.ctx
    s.decide(owed.decision)
    s.set_state(StepState.WAITING)
    c = owed.cond
    limit = c.wait.timeout_s if c.wait else options.DEFAULT_WAIT.total_seconds()
    if ctx.over_bound():  # probes again in the next run
        return Park(s.parked(ParkedAt.START))
    try:
        await workflow.wait_condition(
            lambda: ctx.state(owed.owner).final or ctx.parking,
            timeout=timedelta(seconds=limit),
            timeout_summary=summaries.owed(
                s.n, ctx.version, owed.owner, c, timedelta(seconds=limit)
            ),
        )
    except TimeoutError:
        d = route(s.situation(Kind.PRE_VIOLATED))
        detail = f"{c.key()}: step {owed.owner} did not establish it within {limit:.0f}s"
        return Failed(d, s.failure("wait_expired", False, detail))
    if not ctx.state(owed.owner).final:
        return Park(s.parked(ParkedAt.START))
    return None
