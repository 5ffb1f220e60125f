"""The guard in a team's workflow: a workflow outbound interceptor that wraps each call of a
guarded activity, and the run's face to plangate (its report query, the approve and reject
Updates, the answer and cancel signals), registered by the inbound interceptor.

A guarded call: its guards derived and its pre conditions read by the worker
(``plangate.guard.check``, a local activity, as a plan step's first read); a card published
where the effect class or the policy asks for a person, answered only with an approver's
proof, the world read again after it; the activity dispatched with its idempotency key and the
approval (the activity interceptor verifies both); its post conditions judged by a fresh read
(``plangate.guard.read``). A check that fails raises ``GuardRefused`` (an ``ApplicationError``
of plangate's code) into the workflow.
Deterministic: the world is read only by the local activities, whose answers the history holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ExecuteWorkflowInput,
    StartActivityInput,
    WorkflowInboundInterceptor,
    WorkflowOutboundInterceptor,
)

from plangate.plans.model import Effect
from plangate.records import visibility
from plangate.records.approvals import ApprovalAnswer, ApprovalDecision, CardStatus
from plangate.records.interface import (
    ANSWER_SIGNAL,
    APPROVE_UPDATE,
    CANCEL_SIGNAL,
    REJECT_UPDATE,
    REPORT_QUERY,
    TEAM_APPROVERS_ACTIVITY,
)
from plangate.records.report import Cancellation, RunReport, RunStatus
from plangate.records.run import CancelRequest
from plangate.records.windows import WINDOWS_MEMO, WINDOWS_MEMO_MAX, RunWindows, executions
from plangate.temporal.errors import GuardHalted
from plangate.temporal.team_call import TeamCall, approver_keys, local
from plangate.workflows.answers import Answers
from plangate.workflows.sealing import SealKey


@dataclass(frozen=True)
class Guarding:
    """What the workflow knows of a guarded activity before its call: its effect (for the
    report) and whether every call of it waits for a person (the table's word, or the effect
    class the deployment asks people for): such a call's guards are decided and its card
    published before it is dispatched. Any other call goes at once and is decided at the call,
    where a policy asking people refuses it for the card (``approval_missing``)."""

    effect: Effect
    asks: bool = False


class GuardedRun:
    """One workflow execution's guarded calls, as a plangate run report."""

    def __init__(self, names: Mapping[str, Guarding], deployment: str,
                 key: SealKey | None = None) -> None:
        self.names = dict(names)  # the guarded activities, as the worker's table says
        self.deployment = deployment  # the deployment's task queue (its reports find it by)
        self.key = key or SealKey()  # the call seal's: the header is the deployment's word
        self.report = RunReport(run_id="", goal="")  # the run's, once it begins (``run``)
        self.answers = Answers()
        self.n = 0
        self.halted: GuardHalted | None = None
        self.cancelled: CancelRequest | None = None
        self.visible = False
        self.shown: visibility.Values | None = None

    # -- the run's face ---------------------------------------------------------------------
    def install(self) -> None:
        """Its query, Updates and signals, under plangate's names (where the team's workflow
        has none of its own by that name)."""
        if workflow.get_query_handler(REPORT_QUERY) is None:
            workflow.set_query_handler(REPORT_QUERY, self._report)
        for name, decision in ((APPROVE_UPDATE, ApprovalDecision.APPROVE),
                               (REJECT_UPDATE, ApprovalDecision.REJECT)):
            if workflow.get_update_handler(name) is None:
                workflow.set_update_handler(name, self._answer_handler(decision),
                                            validator=self._validator(decision))
        if workflow.get_signal_handler(ANSWER_SIGNAL) is None:
            workflow.set_signal_handler(ANSWER_SIGNAL, self._answer_signal)
        if workflow.get_signal_handler(CANCEL_SIGNAL) is None:
            workflow.set_signal_handler(CANCEL_SIGNAL, self._cancel)

    def _report(self) -> dict[str, Any]:
        return self.report.model_dump(mode="json")

    def _validator(self, decision: ApprovalDecision) -> Callable[[dict[str, Any]], None]:
        def validate(answer: dict[str, Any]) -> None:
            why = self.answers.refusal(self.report, ApprovalAnswer.model_validate(answer),
                                       decision)
            if why is not None:
                raise ApplicationError(why, type="answer_refused", non_retryable=True)
        return validate

    def _answer_handler(self, decision: ApprovalDecision) -> Callable[[dict[str, Any]], Any]:
        async def handle(answer: dict[str, Any]) -> dict[str, Any]:
            a = ApprovalAnswer.model_validate(answer)
            why = await self._refusal_now(a, decision)
            if why is not None:
                raise ApplicationError(why, type="answer_refused", non_retryable=True)
            receipt = self.answers.apply(self.report, a, decision, "update")
            self._show()
            return receipt.model_dump(mode="json")
        return handle

    async def _answer_signal(self, answer: dict[str, Any]) -> None:
        a = ApprovalAnswer.model_validate(answer)
        if await self._refusal_now(a, a.decision) is None:
            self.answers.apply(self.report, a, a.decision, "signal")
            self._show()

    async def _refusal_now(self, answer: ApprovalAnswer, decision: ApprovalDecision) -> str | None:
        """Judged by the approvers the worker lists now: a key removed since neither approves
        nor rejects."""
        listed = await local(TEAM_APPROVERS_ACTIVITY, workflow.info().workflow_id,
                             f"plangate: who may answer the card of call {answer.step}")
        self.answers.approvers = approver_keys(json.loads(listed))
        return self.answers.refusal(self.report, answer, decision)

    def _cancel(self, request: dict[str, Any]) -> None:
        if self.cancelled is None:
            self.cancelled = CancelRequest.model_validate(request)

    # -- visibility ---------------------------------------------------------------------------
    def _status(self) -> RunStatus:
        if self.report.status.final:
            return self.report.status
        if any(a.status is CardStatus.PENDING for a in self.report.approvals):
            return RunStatus.AWAITING_APPROVAL
        return self.report.status

    def _show(self, status: RunStatus | None = None) -> None:
        if status is not None:
            self.report.status = status
            if status.final:
                self._windows()
        if not self.visible:
            return
        now = visibility.values(self._status(), self.report.goal)
        ups = visibility.updates(now, self.shown)
        if ups:
            workflow.upsert_search_attributes(ups)
        self.shown = now

    def _windows(self) -> None:
        """Each guarded call's windows, as the staleness report reads them (a memo; no search
        attribute needs registering for it)."""
        rep = self.report
        if not rep.steps or rep.begun_at is None:
            return
        memo = RunWindows(execution=workflow.info().run_id, run_id=rep.run_id, status=rep.status,
                          calls=executions(rep, rep.submitted_at or rep.begun_at, rep.begun_at),
                          deployment=self.deployment)
        data = memo.model_dump(mode="json")
        if len(json.dumps(data)) <= WINDOWS_MEMO_MAX:
            workflow.upsert_memo({WINDOWS_MEMO: data})

    # -- the workflow, watched ---------------------------------------------------------------
    async def run(self, body: Any) -> Any:
        """The team's workflow, failed by a halt and stopped by a cancel whatever its own code
        catches."""
        self._begin()
        task = asyncio.ensure_future(body)
        try:
            await workflow.wait_condition(
                lambda: task.done() or self.halted is not None or self.cancelled is not None)
        except asyncio.CancelledError:  # Temporal's own cancel: the team's code meets it
            task.cancel()
            return await task
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):  # its end is the halt's or the cancel's
                await task
        if self.halted is not None:
            self._show(RunStatus.HALTED)
            raise self.halted
        if self.cancelled is not None and self.report.cancellation is None:
            self.report.cancellation = Cancellation(reason=self.cancelled.reason,
                                                    requester=self.cancelled.requester,
                                                    at=workflow.now())
            self._show(RunStatus.CANCELLED)
            who = self.cancelled.requester or "someone"
            raise ApplicationError(f"cancelled by {who}: {self.cancelled.reason}",
                                   type="cancelled", non_retryable=True)
        try:
            result = task.result()
        except BaseException:
            self._show(RunStatus.FAILED)
            raise
        self._show(RunStatus.SUCCEEDED)
        return result

    def _begin(self) -> None:
        """The run's report (empty until a guarded call), and its face to plangate."""
        info = workflow.info()
        self.report = RunReport(
            run_id=info.workflow_id, goal=visibility.guarded_goal(info.workflow_type,
                                                                  self.deployment),
            submitted_at=info.start_time, begun_at=workflow.now(),
        )
        self.install()

    # -- one guarded call ----------------------------------------------------------------------
    async def call(self, input: StartActivityInput,
                   start: Callable[[StartActivityInput], Any]) -> Any:
        """The call dispatched at once, its guards decided and its conditions read at the call
        (the activity interceptor), the guard's answer on its result; the workflow decides the
        guards first (``plangate.guard.check``) only where the call needs a person's approval,
        which the activity says by refusing a call that carries none (``approval_missing``)."""
        self.n += 1
        call = TeamCall(self, input, self.n)
        if self.names[input.activity].asks:  # the table or the deployment asks every call
            await call.approved()
        return await call.answered(await call.dispatched(start))


class _Outbound(WorkflowOutboundInterceptor):
    def __init__(self, next: WorkflowOutboundInterceptor, run: GuardedRun) -> None:
        super().__init__(next)
        self.run = run

    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        """An unguarded call: the SDK's handle. A guarded one: a handle of the SDK's public
        class (an ``asyncio.Task``) over the guarded call, which the SDK's own cannot be: the
        SDK makes its handle with the one ``ScheduleActivityTask`` command it stands for,
        synchronously, while a guarded call may wait for a person before any command, be
        dispatched again (after a card, or a policy that moved), and end with a read after the
        activity, its result the guard's to unwrap. Cancelling it cancels what the call waits
        on: a card, or the SDK's handle of the dispatched activity."""
        if input.activity not in self.run.names:
            return super().start_activity(input)
        handle: workflow.ActivityHandle[Any] = workflow.ActivityHandle(
            self.run.call(input, super().start_activity))
        handle.set_name(f"activity: {input.activity} (guarded by plangate)")
        # as the SDK does for the tasks it makes: a worker that stops drops a workflow's pending
        # tasks, which asyncio would log as destroyed
        if hasattr(handle, "_log_destroy_pending"):
            setattr(handle, "_log_destroy_pending", False)  # noqa: B010 - asyncio's, not typed
        return handle


def workflow_interceptor(
    names: Mapping[str, Guarding], deployment: str, key: SealKey | None = None,
) -> type[WorkflowInboundInterceptor]:
    """The inbound interceptor class for workflows on a worker guarding ``names`` for the
    deployment of task queue ``deployment``, sealing each guarded call with ``key``."""
    guarded = dict(names)

    class GuardInbound(WorkflowInboundInterceptor):
        def init(self, outbound: WorkflowOutboundInterceptor) -> None:
            self.run = GuardedRun(guarded, deployment, key)
            super().init(_Outbound(outbound, self.run))

        async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
            return await self.run.run(super().execute_workflow(input))

    return GuardInbound
