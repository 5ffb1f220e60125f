"""The reads that are not a step's own local activity: a step's first read fused into the post
check of the step before it (one read of the world instead of two, when nothing else runs), and
the reads a tool's activity makes at the call (its pre conditions the instant before the tool
acts, its post conditions with the next step's first read the instant after).

The read made ahead of a step is a ``ReadAhead``, computed here where the call that makes it
is scheduled; the answer is paired with it and kept in ``VersionContext.prefetched`` for the
step, which takes it as it is (``probing.check_before``). None where the step reads itself.
"""

from __future__ import annotations

from pydantic import JsonValue, ValidationError

from plangate.plans import jsonpath
from plangate.plans.model import Condition, Step
from plangate.records.calls import Outcome, ProbeReport, ProbeRequest
from plangate.records.read_ahead import ReadAhead
from plangate.records.report import Phase, StepState
from plangate.workflows import bookkeeping, calls, summaries
from plangate.workflows.step import Failed, Prepared, StepScope

# How a tool's activity refuses a call whose check at the call did not hold (``ToolCall.check``):
# the details carry the read.
AT_CALL_REFUSALS = ("precondition_failed", "probe_unknown")


def own(s: StepScope, p: Prepared) -> ReadAhead:
    """What the step reads before its call when nothing read it ahead of it."""
    return ReadAhead.whole(s.step, s.guard, p.args, p.pre, p.post)


def alone(s: StepScope) -> Step | None:
    """The one step that depends on this one alone, while it has not begun and no other step
    runs: nothing can come between this step's read after its call and that step's first read."""
    ctx, n = s.ctx, s.n
    after = [t for t in ctx.plan.steps if t.depends_on == [n]]
    busy = [
        t for t in ctx.plan.steps
        if t.n != n and ctx.state(t.n) not in (StepState.PENDING, StepState.DONE,
                                               StepState.SKIPPED)
    ]
    if len(after) != 1 or busy or ctx.state(after[0].n) is not StepState.PENDING:
        return None
    return after[0]


def successor_read(s: StepScope, output: dict[str, JsonValue] | None) -> ReadAhead | None:
    """The first read of the one step that depends on this one alone, to be fused into this
    step's post check (``ReadAhead.fused``). Not for a step whose first read needs its own
    record (field probes)."""
    ctx = s.ctx
    nxt_step = alone(s)
    if nxt_step is None:
        return None
    binds: dict[str, JsonValue] = {}
    for name, path in s.step.binds.items():
        try:
            binds[name] = jsonpath.get(output or {}, path)
        except jsonpath.PathError:
            return None
    nxt = StepScope(ctx, nxt_step, also_bound=binds)
    prepared = nxt.prepare()
    if isinstance(prepared, Failed):
        return None
    ahead = ReadAhead.fused(nxt_step, nxt.guard, prepared.args, prepared.pre, prepared.post)
    systems = ctx.guarded.systems
    if not ahead.conditions or any(
        systems.get(c.probe, "record") == "record" for c in ahead.conditions
    ):
        return None
    return ahead


def keep_for_successor(
    s: StepScope, report: ProbeReport, mine: int, successor: ReadAhead
) -> None:
    """The part of a fused read after the first ``mine`` results, kept for the next step."""
    theirs = report.model_copy(update={"results": report.results[mine:], "elapsed_ms": 0.0})
    s.ctx.prefetched[successor.n] = successor.answered(theirs)


async def fused_post(
    s: StepScope, p: Prepared, refs: dict[str, JsonValue] | None, successor: ReadAhead
) -> ProbeReport | None:
    """This step's post check and the next step's first read in one call. When every post
    condition holds, the next step's part is kept for it; otherwise (or when the call fails)
    None, and the post check is made on its own."""
    req = ProbeRequest(
        step=p.ref, conditions=[*p.post, *successor.conditions], idempotency_key=p.key,
        output=refs, lenient=successor.lenient,
    )
    answer = await calls.probe(
        req, summaries.fused(s.n, successor.n, s.ctx.version, req.conditions)
    )
    if not isinstance(answer, calls.Probed):
        return None
    mine = answer.report.model_copy(update={"results": answer.report.results[: len(p.post)]})
    if any(r.outcome is not Outcome.HOLDS for r in mine.results):
        return None
    bookkeeping.record_check(s.ctx.report, s.rep, Phase.POST, s.attempt, mine)
    keep_for_successor(s, answer.report, len(p.post), successor)
    return mine


# -- at the call ---------------------------------------------------------------------------------
def at_call(
    s: StepScope, p: Prepared
) -> tuple[list[Condition], list[Condition], list[str], ReadAhead | None]:
    """What the tool's activity reads around the call (``ToolCall.check`` and ``after``): the
    pre conditions before; the post conditions after, with the next step's first read when it
    can be fused (as in ``successor_read``; known before the call unless this step binds
    values from its result)."""
    if not p.post:
        return p.pre, [], [], None
    successor = None if s.step.binds else successor_read(s, None)
    if successor is None:
        return p.pre, p.post, [], None
    return p.pre, [*p.post, *successor.conditions], successor.lenient, successor


def after_call(
    s: StepScope, p: Prepared, report: ProbeReport | None, successor: ReadAhead | None
) -> ProbeReport | None:
    """The read made in the tool's activity right after the call (its ``after``, one result a
    condition, in order): the post check's first read (recorded as such), its verdict the same
    as the workflow's own read would get. When every post condition held, the next step's part
    is kept for it, if nothing else has begun since. None when there is no usable read (none
    was made in time, or a probe could not answer): the workflow reads itself."""
    if report is None:
        return None  # never a pass
    mine = report.model_copy(update={"results": report.results[: len(p.post)]})
    bookkeeping.record_check(s.ctx.report, s.rep, Phase.POST, s.attempt, mine)
    if mine.unknown:
        return None
    nxt = alone(s)  # still so after the call: the read is the next step's too
    if mine.all_hold and successor is not None and nxt and nxt.n == successor.n:
        keep_for_successor(s, report, len(p.post), successor)
    return mine


def record_at_call(s: StepScope, data: JsonValue) -> ProbeReport | None:
    """The read that refused a call at its door, kept in the report as a check."""
    try:
        read = ProbeReport.model_validate(data)
    except ValidationError:
        return None
    bookkeeping.record_check(s.ctx.report, s.rep, Phase.AT_CALL, s.attempt, read)
    return read


def first_read_at_call(s: StepScope, refused: ProbeReport) -> bool:
    """Whether every condition that refused the call was read there for the first time."""
    failed = {r.condition.key() for r in refused.results if r.outcome is not Outcome.HOLDS}
    return bool(failed) and failed <= s.read_at_call_only
