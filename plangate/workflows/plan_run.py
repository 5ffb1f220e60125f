"""The plan-run workflow: runs plan versions until one succeeds, a person must look, or the
re-planning budget is spent. The run report is always available by query."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from plangate.plans.guards import GuardedPlan
    from plangate.plans.model import Plan
    from plangate.records.approvals import ApprovalAnswer, ApprovalReceipt, Decision, RefusedAnswer
    from plangate.records.calls import ProbeReport
    from plangate.records.report import Cancellation, FailureRecord, RunReport, RunStatus, StepState
    from plangate.records.run import CancelRequest, Carried, Resolved, RunInput
    from plangate.workflows import bookkeeping, guarding, replanning
    from plangate.workflows.answers import Answers
    from plangate.workflows.context import VersionContext, key_tag
    from plangate.workflows.execution import Resumed, VersionOutcome, execute_version
    from plangate.workflows.showing import Shown

PLAN_RUN_WORKFLOW = "PlanRun"  # the workflow type, as Temporal visibility lists it

# Runs that began before it neither upsert search attributes nor put summaries on what they
# schedule: their histories must replay as they ran (an upsert is a command of its own).
# A run that has it began on code with every earlier patch, and takes them without asking
# (``VersionContext.recent``). Asked lazily, a patch first asked right after a local activity's
# result could fail to replay: when a query reaches the worker while a local activity runs, the
# workflow task may be completed with the activity's marker but before the code that follows
# its result; replaying, that code runs one workflow task early, before the patch's marker is
# announced ("Non-deprecated patch marker encountered for change
# post-wait-reads-on-schedule"). And every patch marker costs two events (the marker and
# TemporalChangeVersion): past ten in the workflow task before an Update, a refused Update is
# no longer discarded but leaves a workflow task in the history.
SEARCH_ATTRIBUTES_PATCH = "search-attributes"
# After a final failure, the steps it leaves undispatched are VOID at once, not when the steps
# in flight have ended (``execution._void_the_rest``): a step waiting for one of them stops
# waiting. Asked once, when the run begins (``VersionContext.void_at_failure``), for the reason
# above: a failure is decided right after an activity's result.
VOID_AT_FAILURE_PATCH = "void-at-failure"
# A tool's activity reads the step's pre conditions the instant before the tool acts and is
# refused unless they hold, and reads its post conditions (with the next step's first read)
# the instant after: the check-to-use window is no longer the call's dispatch, and a chain of
# guarded steps needs no local activity between its calls. Asked once, when the run begins.
READS_IN_CALL_PATCH = "reads-in-call"
# Every plan version's guards are this worker's own (``guard.resolve``, a local activity that
# also makes the first steps' first reads; a re-planned version's, the review's), never the
# input's; an answer to a card counts only with an approver's proof; a run's carried
# state comes only from the run before it. Asked once, first, when the run begins: a run that
# has it takes every patch before it without asking.
DEPLOYMENT_GUARDS_PATCH = "deployment-guards"


@workflow.defn(name=PLAN_RUN_WORKFLOW)
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
                goal=inp.plan.plan.goal,
                replans_max=inp.plan.plan.budget.replans_max,
                status=RunStatus.QUEUED,  # until the run begins (a queued run waits its delay)
                submitted_at=workflow.info().workflow_start_time,
                begun_at=workflow.info().start_time,
            )
        self._versions: asyncio.Task[RunInput | None] | None = None
        self._stopped_by_signal = False
        self._metadata = False  # summaries and search attributes: not in runs from before
        self._registered = False  # the namespace has the search attributes (the input says)
        self._void_at_failure = False  # VOID_AT_FAILURE_PATCH: not in runs from before
        self._reads_in_call = False  # READS_IN_CALL_PATCH: not in runs from before
        self._own_guards = False  # DEPLOYMENT_GUARDS_PATCH: not in runs from before
        self._answers = Answers()  # who may answer this run's cards (``guard.resolve``)
        self._shown = Shown(self._report.goal)  # what the Temporal UI and visibility show

    @workflow.query(name="report")
    def report(self) -> RunReport:
        return self._report

    @workflow.signal(name="cancel")
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
    @workflow.update(name="approve")
    def approve(self, answer: ApprovalAnswer) -> ApprovalReceipt:
        return self._answers.apply(self._report, answer, Decision.APPROVE, "update")

    @approve.validator
    def _validate_approve(self, answer: ApprovalAnswer) -> None:
        why = self._answers.refusal(self._report, answer, Decision.APPROVE)
        if why is not None:
            raise ValueError(why)

    @workflow.update(name="reject")
    def reject(self, answer: ApprovalAnswer) -> ApprovalReceipt:
        return self._answers.apply(self._report, answer, Decision.REJECT, "update")

    @reject.validator
    def _validate_reject(self, answer: ApprovalAnswer) -> None:
        why = self._answers.refusal(self._report, answer, Decision.REJECT)
        if why is not None:
            raise ValueError(why)

    @workflow.signal(name="answer")
    def answer(self, answer: ApprovalAnswer) -> None:
        """The same answer from a client that can only signal: the same checks, and a refused
        answer is recorded and ignored."""
        why = self._answers.refusal(self._report, answer, answer.decision)
        if why is not None:
            self._report.refused_answers.append(
                RefusedAnswer(answer=answer, why=why, at=workflow.now())
            )
            return
        self._answers.apply(self._report, answer, answer.decision, "signal")

    @workflow.run
    async def run(self, inp: RunInput) -> RunReport:
        # Asked first: a run that has it began on code with every patch before it, and takes
        # them without asking (no markers: each costs two events, see SEARCH_ATTRIBUTES_PATCH)
        self._own_guards = workflow.patched(DEPLOYMENT_GUARDS_PATCH)
        if self._own_guards:
            self._metadata = self._void_at_failure = self._reads_in_call = True
        else:
            self._metadata = workflow.patched(SEARCH_ATTRIBUTES_PATCH)
            self._void_at_failure = workflow.patched(VOID_AT_FAILURE_PATCH)
            self._reads_in_call = workflow.patched(READS_IN_CALL_PATCH)
        self._answers.proven = self._own_guards
        self._registered = inp.search_attributes
        self._shown.begin(upserts=self._metadata and self._registered)
        if self._report.status is RunStatus.QUEUED:
            self._report.status = RunStatus.RUNNING
        self._shown.show(self._report)
        shown = asyncio.create_task(self._keep_shown())
        self._versions = asyncio.create_task(self._run_versions(inp))
        if self._stopped_by_signal:  # signalled before the run began
            self._versions.cancel()
        try:
            following = await self._versions
            if following is not None:  # the history is long: the run goes on in a new one
                await workflow.wait_condition(workflow.all_handlers_finished)
                shown.cancel()
                self._shown.hand_over()
                workflow.continue_as_new(following)
        except asyncio.CancelledError:
            self._cancelled()
            self._shown.show(self._report)
            if not self._stopped_by_signal:
                raise  # Temporal asked (UI, CLI, API): the execution ends canceled
        except Exception as e:
            # A bug, or input no check caught: retrying the workflow task could never change
            # it. The run fails, with its report, instead of hanging as "running".
            self._crashed(e)
        self._shown.show(self._report)  # the final status, in the workflow task of the end
        shown.cancel()
        return self._report

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
        plan: GuardedPlan | None = inp.plan
        c = inp.carried
        patience = timedelta(seconds=inp.outage_patience_s)
        ctx: VersionContext | None = None
        resumed: Resumed | None = None
        first_reads: dict[int, ProbeReport] = {}
        if c is None:
            made_at = inp.plan_made_at or workflow.info().start_time
            version, begun = 1, False
            base = VersionContext(
                run_id=self._report.run_id, guarded=inp.plan, version=0, plan_made_at=made_at,
                report=self._report, key_tag=key_tag(), history=inp.history,
                outage_patience=patience, recent=self._metadata,
                void_at_failure=self._void_at_failure, reads_in_call=self._reads_in_call,
                # the run's authority and policy are the first plan's, whatever a re-plan says
                on_behalf_of=inp.plan.plan.on_behalf_of,
                policy_bundle=inp.plan.plan.policy_bundle,
            )
        else:
            made_at, version, begun = c.plan_made_at, c.version, c.begun
            base = VersionContext(
                run_id=self._report.run_id, guarded=inp.plan, version=c.version,
                plan_made_at=made_at, report=self._report, key_tag=c.key_tag,
                history=inp.history, outage_patience=patience, on_behalf_of=c.on_behalf_of,
                policy_bundle=c.policy_bundle, bound=dict(c.bound), verified=dict(c.verified),
                recent=self._metadata, void_at_failure=self._void_at_failure,
                reads_in_call=self._reads_in_call,
            )
            resumed = Resumed(c.parked, c.failure, c.failed_state) if begun else None
        if self._own_guards:
            base = replace(base, own_guards=True, submission=inp.submission)
            forged = guarding.forged(inp)
            if forged is not None:  # nothing of what it carries is shown as this run's
                self._report = RunReport(
                    run_id=workflow.info().workflow_id, goal=inp.plan.plan.goal,
                    replans_max=inp.plan.plan.budget.replans_max,
                    submitted_at=workflow.info().workflow_start_time,
                    begun_at=workflow.info().start_time,
                )
                guarding.refuse(self._report, forged, "not_permitted", None, version, made_at)
                return None
            if not begun:  # what the run will do, shown while its guards are derived
                self._report.plan_version = version
                for step in inp.plan.plan.steps:
                    bookkeeping.step_shown(self._report, step, version, made_at)
            found = await self._guards(inp.plan.plan, version, base, first_run=c is None)
            if found is None:
                return None
            plan, resolved = found
            first_reads = resolved.reads
            base = replace(
                base, guarded=plan, on_behalf_of=resolved.on_behalf_of,
                policy_bundle=resolved.policy_bundle,
            )
        ctx = base
        while plan is not None:
            if not begun and ctx.over_bound():  # the next version begins in the next run
                return self._carry(ctx, plan, version, made_at, begun=False)
            ctx = self._begin(plan, version, made_at, ctx, begun)
            for n, read in first_reads.items():  # made with the guards, for the first steps
                ctx.prefetched[n] = ([r.condition.key() for r in read.results], read)
            first_reads = {}
            outcome = await execute_version(ctx, resumed)
            if outcome.suspended:
                return self._carry(ctx, plan, version, made_at, begun=True, outcome=outcome)
            resumed, begun = None, False
            plan = await replanning.next_plan(self._report, ctx, outcome, self._metadata)
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
                self._report, resolved.refusal, resolved.refusal_code, guarded, version, made_at
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
            key_tag=ctx.key_tag, bound=ctx.bound, verified=ctx.verified,
            parked=outcome.parked if outcome else [],
            failure=outcome.failure if outcome else None,
            failed_state=outcome.failed_state if outcome else None,
            on_behalf_of=ctx.on_behalf_of, policy_bundle=ctx.policy_bundle,
        )
        if ctx.own_guards:  # the next run derives them again: not twice in its history
            plan = GuardedPlan(plan=plan.plan)
        return RunInput(
            plan=plan, history=ctx.history,
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
        return VersionContext(
            run_id=self._report.run_id, guarded=plan, version=version,
            plan_made_at=made_at, report=self._report, key_tag=prev.key_tag,
            history=prev.history, outage_patience=prev.outage_patience,
            on_behalf_of=prev.on_behalf_of, policy_bundle=prev.policy_bundle,
            bound=dict(prev.bound), verified=dict(prev.verified), recent=prev.recent,
            void_at_failure=prev.void_at_failure, reads_in_call=prev.reads_in_call,
            own_guards=prev.own_guards, submission=prev.submission,
        )

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
            if not s.state.final:
                s.state = StepState.CANCELLED
