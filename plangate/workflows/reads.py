"""The reads that are not a step's own local activity: a step's first read fused into the post
check of the step before it (one read of the world instead of two, when nothing else runs), and
the reads a tool's activity makes at the call (its pre conditions the instant before the tool
acts, its post conditions with the next step's first read the instant after).

Each answers with a value: what to read, what was read, or None where the step reads itself.
"""

from __future__ import annotations

from pydantic import JsonValue, ValidationError

from plangate.plans import jsonpath
from plangate.plans.guards import first_read as plan_first_read
from plangate.plans.guards import version_condition
from plangate.plans.model import Condition, Step
from plangate.records.calls import Outcome, ProbeReport, ProbeRequest
from plangate.records.report import Phase, StepState
from plangate.workflows import bookkeeping, calls, summaries
from plangate.workflows.step import Failed, Prepared, StepScope, Successor

# How a tool's activity refuses a call whose check at the call did not hold (``ToolCall.check``):
# the details carry the read.
AT_CALL_REFUSALS = ("precondition_failed", "probe_unknown")


def first_read(s: StepScope, p: Prepared) -> tuple[list[Condition], list[Condition], list[str]]:
    """What the step reads before its call (``plans.guards.first_read``)."""
    return plan_first_read(s.step, s.guard, p.args, p.pre, p.post)


def fused_first(s: StepScope, p: Prepared) -> tuple[list[Condition], list[str]]:
    """The step's first read as the step before's activity makes it, right after its call:
    the skip check, and of the pre conditions only the version the call
    will carry. The others are read at the step's own call, which acts only if they hold, and
    which a read just before would only repeat. A step a person approves reads them all before
    its card is shown."""
    done, first, only = first_read(s, p)
    if s.guard.approval:
        return first, only
    version = version_condition(s.guard, p.args)
    carried = [c for c in p.pre if version is not None and c.key() == version.key()]
    return done + carried, only


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


def successor_read(s: StepScope, output: dict[str, JsonValue] | None) -> Successor | None:
    """The first read of the one step that depends on this one alone, to be fused into this
    step's post check. Not for a step whose first read needs its own record (field probes)."""
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
    first, only = fused_first(nxt, prepared)
    systems = ctx.guarded.systems
    if not first or any(systems.get(c.probe, "record") == "record" for c in first):
        return None
    return nxt_step.n, first, only


def keep_for_successor(
    s: StepScope, report: ProbeReport, mine: int, successor: Successor
) -> None:
    """The part of a fused read after the first ``mine`` results, kept for the next step."""
    m, first, _ = successor
    theirs = report.model_copy(update={"results": report.results[mine:], "elapsed_ms": 0.0})
    s.ctx.prefetched[m] = ([c.key() for c in first], theirs)


async def fused_post(
    s: StepScope, p: Prepared, refs: dict[str, JsonValue] | None, successor: Successor
) -> ProbeReport | None:
    """This step's post check and the next step's first read in one call. When every post
    condition holds, the next step's part is kept for it; otherwise (or when the call fails)
    None, and the post check is made on its own."""
    m, first, lenient = successor
    req = ProbeRequest(
        step=p.ref, conditions=[*p.post, *first], idempotency_key=p.key, output=refs,
        lenient=lenient,
    )
    answer = await calls.probe(req, summaries.fused(s.n, m, s.ctx.version, req.conditions))
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
) -> tuple[list[Condition], list[Condition], list[str], Successor | None]:
    """What the tool's activity reads around the call (``ToolCall.check`` and ``after``): the
    pre conditions before; the post conditions after, with the next step's first read when it
    can be fused (as in ``successor_read``; known before the call unless this step binds
    values from its result)."""
    if not p.post:
        return p.pre, [], [], None
    successor = None if s.step.binds else successor_read(s, None)
    if successor is None:
        return p.pre, p.post, [], None
    _, first, lenient = successor
    return p.pre, [*p.post, *first], lenient, successor


def after_call(
    s: StepScope,
    p: Prepared,
    asked: list[Condition],
    report: ProbeReport | None,
    successor: Successor | None,
) -> ProbeReport | None:
    """The read made in the tool's activity right after the call: the post check's first read
    (recorded as such), its verdict the same as the workflow's own read would get. When every
    post condition held, the next step's part is kept for it, if nothing else has begun since.
    None when there is no usable read (none was made, it is not an answer to what was asked,
    or a probe could not answer): the workflow reads itself."""
    if report is None or [r.condition.key() for r in report.results] != [
        c.key() for c in asked
    ]:
        return None  # never a pass
    mine = report.model_copy(update={"results": report.results[: len(p.post)]})
    bookkeeping.record_check(s.ctx.report, s.rep, Phase.POST, s.attempt, mine)
    if mine.unknown:
        return None
    nxt = alone(s)  # still so after the call: the read is the next step's too
    if mine.all_hold and successor is not None and nxt and nxt.n == successor[0]:
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
