"""A plan version's guards are the worker's own (``guard.resolve``, a local activity that also
makes the first steps' first reads), never the input's, and so are the run's limits (outage
patience, history bound: the input may ask for less; a tool's heartbeat timeout); and a run
whose input plangate cannot have made, or whose guards refuse it, acts on nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from temporalio import workflow

from plangate.plans.guards import GuardedPlan
from plangate.plans.limits import (
    MAX_HISTORY_BYTES,
    MAX_HISTORY_EVENTS,
    MAX_OUTAGE_PATIENCE_S,
    MAX_TOOL_HEARTBEAT_S,
    MIN_TOOL_HEARTBEAT_S,
)
from plangate.plans.model import Plan
from plangate.records import options
from plangate.records.codes import CODES
from plangate.records.interface import GUARD_ACTIVITY
from plangate.records.report import FailureRecord, RunReport, RunStatus, StepState
from plangate.records.run import GuardRequest, HistoryBound, Resolved, RunInput
from plangate.workflows import bookkeeping, summaries
from plangate.workflows.context import VersionContext
from plangate.workflows.router import Refused

UNAVAILABLE = "system_unavailable"


def forged(inp: RunInput) -> str | None:
    """Why this run's input cannot be what plangate itself made: carried state comes only from
    continue-as-new (a client cannot set the run it continues), and plangate never lets
    Temporal re-run a plan (a cron schedule or a retry policy would start it again with the
    same input)."""
    info = workflow.info()
    if info.cron_schedule or info.retry_policy is not None:
        return (
            "a plan run is never scheduled or retried by Temporal (it was started with a "
            "cron schedule or a retry policy)"
        )
    if inp.carried is not None and info.continued_run_id is None:
        return (
            "the run was started with the state of a run before it, which only the run "
            "before it can hand on (continue-as-new)"
        )
    return None


def patience(inp: RunInput) -> timedelta:
    """The input's outage patience, never past plangate's limit (the worker's may be less:
    ``limited``)."""
    return timedelta(seconds=min(MAX_OUTAGE_PATIENCE_S, inp.outage_patience_s))


def limited(ctx: VersionContext, resolved: Resolved) -> VersionContext:
    """``ctx`` under the smaller of each limit: the input's and the deployment's (what the
    worker said with the guards), never past plangate's own. A worker from before these
    limits said none: its runs keep the input's."""
    history, waits = ctx.history, ctx.outage_patience
    if resolved.history is not None:
        most = HistoryBound(events=MAX_HISTORY_EVENTS, bytes=MAX_HISTORY_BYTES)
        history = history.within(resolved.history).within(most)
    if resolved.outage_patience_s is not None:
        worker = min(MAX_OUTAGE_PATIENCE_S, resolved.outage_patience_s)
        waits = min(waits, timedelta(seconds=worker))
    beat = ctx.tool_heartbeat
    if resolved.tool_heartbeat_s is not None:  # the worker's alone: the input has none
        beat = timedelta(seconds=min(MAX_TOOL_HEARTBEAT_S,
                                     max(MIN_TOOL_HEARTBEAT_S, resolved.tool_heartbeat_s)))
    return replace(ctx, history=history, outage_patience=waits, tool_heartbeat=beat)


async def resolve(plan: Plan, version: int, ctx: VersionContext, *, first_run: bool) -> Resolved:
    """The plan version's guards as this worker derives them, and what else the worker says
    (who may answer its cards, the run's principal and policy, or why it may not act)."""
    info = workflow.info()
    # a new run's first steps are read in the same activity (nothing is bound yet), under
    # the keys its steps will have: this worker's (``Resolved.whole_id_keys``)
    keyed = replace(ctx, version=version, whole_id_keys=True)
    reads = {
        s.n: keyed.idempotency_key(s.n) for s in plan.steps if not s.depends_on
    } if first_run else {}
    req = GuardRequest(
        plan=plan, version=version, workflow_id=info.workflow_id, submission=ctx.submission,
        started_at=info.workflow_start_time if first_run else None,
        first_run_id=info.first_execution_run_id,
        on_behalf_of=None if version == 1 else ctx.on_behalf_of,
        policy_bundle=None if version == 1 else ctx.policy_bundle,
        reads=reads,
    )

    async def asked() -> Resolved:
        got: Resolved = await workflow.execute_local_activity(
            GUARD_ACTIVITY, req, result_type=Resolved,
            start_to_close_timeout=options.GUARD_TIMEOUT, retry_policy=options.GUARD_RETRY,
            summary=summaries.guards(version, len(plan.steps), sorted(reads)),
        )
        return got

    resolved = await asked()
    # What the guards could not record or read (Postgres, the policy files) is an outage,
    # not a verdict: asked again, as a step's probes are, for the run's outage patience.
    waited, tries = timedelta(0), 0
    while resolved.refusal_code == UNAVAILABLE and waited < ctx.outage_patience and ctx.kept:
        tries += 1
        pause = min(options.outage_backoff(tries), ctx.outage_patience - waited)
        workflow.logger.warning("the guards wait for the deployment's systems (%s): %s",
                                pause, resolved.refusal)
        await workflow.sleep(pause)
        waited += pause
        resolved = await asked()
    return resolved


def refuse(
    r: RunReport, why: str, code: str, plan: GuardedPlan | None, version: int, made_at: datetime,
    kept: bool = False,
) -> None:
    """The run acts on nothing: its version's steps VOID, its status halted (authority: a
    person must look) or failed (a plan no check would pass)."""
    if plan is not None:
        r.plan_version = version
        for s in plan.plan.steps:
            shown = bookkeeping.step_shown(r, s, version, made_at)
            shown.effect, shown.state = plan.guard(s.n).effect, StepState.VOID
            shown.policy = plan.guard(s.n).policy
    status = CODES[code].status
    r.failure = FailureRecord(
        step=0, tool="", plan_version=version, code=code, status=status, retryable=False,
        detail=why,
    )
    if Refused.of(status) is Refused.REVOKED:
        r.metrics.answers_403 += 1
        r.status = RunStatus.HALTED
    elif code == UNAVAILABLE and kept:
        r.status = RunStatus.HALTED  # the deployment's systems away past the run's patience
    else:
        r.status = RunStatus.FAILED
    r.escalation = f"refused before any step acted: {why}"
