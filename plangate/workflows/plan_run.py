"""The plan-run workflow: runs plan versions until one succeeds, a person must look, or the
re-planning budget is spent. The run report is always available by query."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ApplicationError, FailureError

from plangate.plans.guards import GuardedPlan
from plangate.plans.model import Plan
from plangate.records import interface
from plangate.records.approvals import (
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalReceipt,
    RefusedAnswer,
)
from plangate.records.report import Cancellation, FailureRecord, RunReport, RunStatus, StepState
from plangate.records.run import CancelRequest, Carried, Resolved, RunInput
from plangate.workflows import bookkeeping, ending, guarding, replanning, summaries
from plangate.workflows.answers import Answers
from plangate.workflows.context import BOUND_PATCH, INDEX_PATCH, KEPT_PATCH, VersionContext
from plangate.workflows.execution import Resumed, VersionOutcome, execute_version
from plangate.workflows.indexing import Index
from plangate.workflows.showing import Shown

_ERROR_TYPES = {
    RunStatus.HALTED: interface.HALTED_ERROR,
    RunStatus.FAILED: interface.FAILED_ERROR,
    RunStatus.CANCELLED: interface.CANCELLED_ERROR,
}


@workflow.defn(name=interface.PLAN_RUN)  # the type visibility lists
class PlanRunWorkflow:
    @workflow.init
    def __init__(self, inp: RunInput) -> None:
        if inp.carried is not None:  # an earlier run of the chain continued as new
            self._report = inp.carried.report
            self._report.restore_samples(inp.carried.samples)
            self._report.segments += 1
        else:
            self._report = RunReport(
                run_id=workflow.info().workflow_id,
                goal=inp.plan.goal,
                replans_max=inp.plan.budget.replans_max,
                status=RunStatus.QUEUED,  # until the run begins (a queued run waits its delay)
                submitted_at=workflow.info().workflow_start_time,
                begun_at=workflow.info().start_time,
            )
        self._versions: asyncio.Task[RunInput | None] | None = None
        self._stopped_by_signal = False
        self._registered = False  # the namespace has the search attributes (the input says)
        self._kept = False  # issue 47's branch (``KEPT_PATCH``), asked as the run begins
        self._bound = False  # issue 48's (``BOUND_PATCH``)
        self._answers = Answers()  # who may answer this run's cards (``guard.resolve``)
        self._shown = Shown(self._report.goal)  # what the Temporal UI and visibility show
        self._index = Index()  # the run's row in the runs index (``INDEX_PATCH``)

    @workflow.query(name=interface.REPORT_QUERY)
    def report(self) -> RunReport:
        return self._report

    @workflow.signal(name=interface.CANCEL_SIGNAL)
    def cancel(self, req: CancelRequest) -> None:
        """Cancel with a reason and who asked: recorded, then the run stops (the first request
        is the one recorded; a cancel from the Temporal UI or CLI has no reason of its own)."""
        if self._report.cancellation is None and not self._report.status.final:
            self._report.cancellation = Cancellation(
                reason=req.reason, requester=req.requester, at=workflow.now()
            )
        self._stopped_by_signal = True
        if self._versions is not None:
            self._versions.cancel()

    # -- answering a card: Updates (refused by their validator: no event in the history) --------
    @workflow.update(name=interface.APPROVE_UPDATE)
    async def approve(self, answer: ApprovalAnswer) -> ApprovalReceipt:
        return await self._take(answer, ApprovalDecision.APPROVE)

    @approve.validator
    def _validate_approve(self, answer: ApprovalAnswer) -> None:
        why = self._answers.refusal(self._report, answer, ApprovalDecision.APPROVE)
        if why is not None:
            raise ValueError(why)

    @workflow.update(name=interface.REJECT_UPDATE)
    async def reject(self, answer: ApprovalAnswer) -> ApprovalReceipt:
        return await self._take(answer, ApprovalDecision.REJECT)

    @reject.validator
    def _validate_reject(self, answer: ApprovalAnswer) -> None:
        why = self._answers.refusal(self._report, answer, ApprovalDecision.REJECT)
        if why is not None:
            raise ValueError(why)

    async def _take(self, answer: ApprovalAnswer, decision: ApprovalDecision) -> ApprovalReceipt:
        """An answer the validator let through, recorded unless its approver is no longer
        one (the Update fails then, nothing recorded)."""
        why = await self._answers.refusal_now(self._report, answer, decision)
        if why is not None:
            raise ApplicationError(why, type=interface.ANSWER_REFUSED_ERROR, non_retryable=True)
        return self._answers.apply(self._report, answer, decision, "update")

    @workflow.signal(name=interface.ANSWER_SIGNAL)
    async def answer(self, answer: ApprovalAnswer) -> None:
        """The same answer from a client that can only signal: the same checks, and a refused
        answer is recorded and ignored."""
        why = self._answers.refusal(self._report, answer, answer.decision)
        if why is None:  # the approver is asked about only for an answer that would count
            try:
                why = await self._answers.refusal_now(self._report, answer, answer.decision)
            except FailureError as e:
                # the worker could not say who its approvers are now: the answer is not taken
                # (sent again, it may be). A signal handler's failure fails the run.
                if not self._kept:
                    raise
                why = f"the approvers could not be listed now ({e}): send the answer again"
        if why is not None:
            self._report.refused_answers.append(
                RefusedAnswer(answer=answer, why=why, at=workflow.now())
            )
            return
        self._answers.apply(self._report, answer, answer.decision, "signal")

    @workflow.run
    async def run(self, inp: RunInput) -> RunReport:
        # asked once, first, the newest first (docs/versioning.md): it implies the older
        self._index.on = workflow.patched(INDEX_PATCH)
        self._bound = self._index.on or workflow.patched(BOUND_PATCH)
        self._kept = self._bound or workflow.patched(KEPT_PATCH)
        self._registered = inp.search_attributes
        self._shown.begin(upserts=self._registered)
        if self._report.status is RunStatus.QUEUED:
            self._report.status = RunStatus.RUNNING
        self._shown.show(self._report)
        shown = asyncio.create_task(self._keep_shown())
        indexing = asyncio.create_task(self._index.keep(lambda: self._report))
        self._versions = asyncio.create_task(self._run_versions(inp))
        if self._stopped_by_signal:  # signalled before the run began
            self._versions.cancel()
        try:
            following = await self._versions
            if following is not None:  # the history is long: the run goes on in a new one
                await workflow.wait_condition(workflow.all_handlers_finished)
                await self._index.stopped(indexing)  # the next execution writes the row
                shown.cancel()
                self._shown.hand_over()
                workflow.continue_as_new(following)
        except asyncio.CancelledError:
            self._cancelled()
            self._shown.show(self._report)
            if not self._stopped_by_signal:
                await self._index.last(indexing, self._report)
                raise  # Temporal asked (UI, CLI, API): the execution ends canceled
        except Exception as e:
            # A bug, or input no check caught: retrying the workflow task could never change
            # it. The run fails, with its report, instead of hanging as "running".
            self._crashed(e)
        self._shown.show(self._report)  # the final status, in the workflow task of the end
        shown.cancel()
        await asyncio.gather(self._index.last(indexing, self._report),
                             ending.keep(self._shown.end(self._report), self._kept))
        r = self._report
        if r.status in _ERROR_TYPES:
            # Temporal's own views (Web UI, ``temporal workflow list``) show it Failed, the
            # failure line as its message; plangate reads the report from the details
            raise ApplicationError(
                summaries.ended(r), r, type=_ERROR_TYPES[r.status], non_retryable=True
            )
        return r

    async def _keep_shown(self) -> None:
        """Show the status whenever it changes (a card published or answered, a re-plan): the
        steps change it deep in their own code; this is the one place that publishes."""
        r = self._report
        while True:
            await workflow.wait_condition(lambda: self._shown.changed(r))
            self._shown.show(self._report)

    async def _run_versions(self, inp: RunInput) -> RunInput | None:
        """Plan versions until the run ends (None), or until its history is long enough that
        it continues as new: then what the next run of the chain needs to go on."""
        c = inp.carried
        # the worker's patience may be less (``guarding.limited``)
        base = VersionContext.of_run(self._report, inp, guarding.patience(inp), self._kept,
                                     self._bound)
        made_at, version = base.plan_made_at, 1 if c is None else c.version
        begun = c is not None and c.begun
        resumed = Resumed(c.parked, c.failure, c.failed_state) if c is not None and begun else None
        forged = guarding.forged(inp)
        if forged is not None:  # nothing of what it carries is shown as this run's
            self._report = RunReport(
                run_id=workflow.info().workflow_id, goal=inp.plan.goal,
                replans_max=inp.plan.budget.replans_max,
                submitted_at=workflow.info().workflow_start_time,
                begun_at=workflow.info().start_time,
            )
            guarding.refuse(self._report, forged, "not_permitted", None, version, made_at)
            return None
        if not begun:  # what the run will do, shown while its guards are derived
            self._report.plan_version = version
            for step in inp.plan.steps:
                bookkeeping.step_shown(self._report, step, version, made_at)
        found = await self._guards(inp.plan, version, base, first_run=c is None)
        if found is None:
            return None
        guarded, resolved = found
        first_reads = resolved.reads
        ctx = replace(
            guarding.limited(base, resolved), guarded=guarded,
            on_behalf_of=resolved.on_behalf_of, policy_bundle=resolved.policy_bundle,
            # the chain's keys as its first run's worker made them; the rest carry them
            whole_id_keys=resolved.whole_id_keys if c is None else base.whole_id_keys,
        )
        plan: GuardedPlan | None = guarded
        while plan is not None:
            if not begun and ctx.over_bound():  # the next version begins in the next run
                return self._carry(ctx, plan, version, made_at, begun=False)
            ctx = self._begin(plan, version, made_at, ctx, begun)
            ctx.prefetched.update(first_reads)  # made with the guards, for the first steps
            first_reads = {}
            outcome = await execute_version(ctx, resumed)
            if outcome.suspended:
                return self._carry(ctx, plan, version, made_at, begun=True, outcome=outcome)
            resumed, begun = None, False
            plan = await replanning.next_plan(self._report, ctx, outcome)
            made_at = workflow.now()
            version += 1
        return None

    async def _guards(
        self, plan: Plan, version: int, ctx: VersionContext, *, first_run: bool
    ) -> tuple[GuardedPlan, Resolved] | None:
        """The plan version with this worker's guards, and what else the worker said; the
        approvers and submitter its cards are judged by are kept. None when the run may not
        act (refused)."""
        resolved = await guarding.resolve(plan, version, ctx, first_run=first_run)
        self._answers.judged_by(resolved)
        guarded = resolved.guarded(plan)
        if resolved.refusal is not None:
            made_at = workflow.now() if version > 1 else ctx.plan_made_at
            guarding.refuse(
                self._report, resolved.refusal, resolved.refusal_code, guarded, version, made_at,
                ctx.kept,
            )
            return None
        return guarded, resolved

    def _carry(
        self,
        ctx: VersionContext,
        plan: GuardedPlan,
        version: int,
        made_at: datetime,
        *,
        begun: bool,
        outcome: VersionOutcome | None = None,
    ) -> RunInput:
        r = self._report
        carried = Carried(
            report=r, samples=r.samples(), version=version, begun=begun, plan_made_at=made_at,
            key_tag=ctx.key_tag, whole_id_keys=ctx.whole_id_keys, bound=ctx.bound,
            verified=ctx.verified,
            parked=outcome.parked if outcome else [],
            failure=outcome.failure if outcome else None,
            failed_state=outcome.failed_state if outcome else None,
            on_behalf_of=ctx.on_behalf_of, policy_bundle=ctx.policy_bundle,
        )
        return RunInput(  # the plan alone: the next run derives its guards again
            plan=plan.plan, history=ctx.history,
            outage_patience_s=ctx.outage_patience.total_seconds(), carried=carried,
            search_attributes=self._registered, submission=ctx.submission,
        )

    def _begin(
        self,
        plan: GuardedPlan,
        version: int,
        made_at: datetime,
        prev: VersionContext,
        begun: bool = False,
    ) -> VersionContext:
        """The context of a plan version, its steps added to the report (unless an earlier run
        of the chain began it); bindings and verified states carry over from ``prev``."""
        if not begun:
            self._report.plan_version = version
            for s in plan.plan.steps:
                shown = bookkeeping.step_shown(self._report, s, version, made_at)
                shown.effect = plan.guard(s.n).effect
                shown.policy = plan.guard(s.n).policy
        return prev.following(plan, version, made_at)

    def _crashed(self, e: Exception) -> None:
        r = self._report
        r.status = RunStatus.FAILED
        detail = f"{type(e).__name__}: {e}"[:500]
        open_steps = [s for s in r.steps if not s.state.final]
        first = open_steps[0] if open_steps else None
        r.failure = FailureRecord(
            step=first.n if first else 0, tool=first.tool if first else "",
            plan_version=r.plan_version, code="internal", status=500, retryable=False,
            detail=f"the run stopped on an unexpected error: {detail}",
        )
        r.escalation = f"plangate failed on an unexpected error: {detail}"
        for s in open_steps:
            s.state = StepState.FAILED if s.state is not StepState.PENDING else StepState.VOID

    def _cancelled(self) -> None:
        self._report.status = RunStatus.CANCELLED
        for s in self._report.steps:
            # a re-plan cut short by the cancel is not left as if still asked
            if not s.state.final or s.state is StepState.REPLANNING:
                s.state = StepState.CANCELLED
