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
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeout
from temporalio.worker import (
    ExecuteWorkflowInput,
    StartActivityInput,
    WorkflowInboundInterceptor,
    WorkflowOutboundInterceptor,
)

from plangate.plans.model import LEDGERED, Effect
from plangate.records import keys, visibility
from plangate.records.approvals import (
    ApprovalAnswer,
    ApprovalCard,
    ApprovalRecord,
    CardStatus,
    Decision,
)
from plangate.records.calls import Outcome, ProbeReport, StepRef, ToolFailure
from plangate.records.codes import CODES
from plangate.records.interface import (
    ANSWER_SIGNAL,
    APPROVE_UPDATE,
    CANCEL_SIGNAL,
    REJECT_UPDATE,
    REPORT_QUERY,
    TEAM_APPROVERS_ACTIVITY,
    TEAM_CHECK_ACTIVITY,
    TEAM_READ_ACTIVITY,
)
from plangate.records.proofs import ApprovalGrant
from plangate.records.report import (
    Cancellation,
    CheckRecord,
    FailureRecord,
    LedgerLink,
    Phase,
    Refusal,
    RunReport,
    RunStatus,
    StepReport,
    StepState,
    StepTimings,
)
from plangate.records.run import CancelRequest
from plangate.records.windows import WINDOWS_MEMO, WINDOWS_MEMO_MAX, RunWindows, executions
from plangate.temporal.calls import (
    ANSWER_META,
    GUARD_VERSION,
    HEADER,
    Checked,
    CheckRequest,
    GuardAnswer,
    GuardHeader,
    ReadRequest,
    header_payload,
    wire_json,
)
from plangate.temporal.errors import GuardHalted, GuardRefused
from plangate.workflows import cards
from plangate.workflows.answers import Answers
from plangate.workflows.context import key_tag
from plangate.workflows.sealing import SealKey, sealed_headers

LOCAL = timedelta(seconds=30)
LOCAL_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=5), maximum_attempts=5)
REDECISIONS = 2  # times a call is decided again when the policies in force moved under it


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
        for name, decision in ((APPROVE_UPDATE, Decision.APPROVE),
                               (REJECT_UPDATE, Decision.REJECT)):
            if workflow.get_update_handler(name) is None:
                workflow.set_update_handler(name, self._answer_handler(decision),
                                            validator=self._validator(decision))
        if workflow.get_signal_handler(ANSWER_SIGNAL) is None:
            workflow.set_signal_handler(ANSWER_SIGNAL, self._answer_signal)
        if workflow.get_signal_handler(CANCEL_SIGNAL) is None:
            workflow.set_signal_handler(CANCEL_SIGNAL, self._cancel)

    def _report(self) -> dict[str, Any]:
        return self.report.model_dump(mode="json")

    def _validator(self, decision: Decision) -> Callable[[dict[str, Any]], None]:
        def validate(answer: dict[str, Any]) -> None:
            why = self.answers.refusal(self.report, ApprovalAnswer.model_validate(answer),
                                       decision)
            if why is not None:
                raise ApplicationError(why, type="answer_refused", non_retryable=True)
        return validate

    def _answer_handler(self, decision: Decision) -> Callable[[dict[str, Any]], Any]:
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

    async def _refusal_now(self, answer: ApprovalAnswer, decision: Decision) -> str | None:
        """Judged by the approvers the worker lists now: a key removed since neither approves
        nor rejects."""
        import base64

        listed = await workflow.execute_local_activity(
            TEAM_APPROVERS_ACTIVITY, workflow.info().workflow_id, result_type=str,
            start_to_close_timeout=LOCAL, retry_policy=LOCAL_RETRY,
            summary=f"plangate: who may answer the card of call {answer.step}",
        )
        self.answers.approvers = {n: base64.b64decode(k) for n, k in json.loads(listed).items()}
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
        call = _Call(self, input, self.n)
        if self.names[input.activity].asks:  # the table or the deployment asks every call
            await call.approved()
        return await call.answered(await call.dispatched(start))


class _Call:
    """One guarded call: its step in the run's report, the guards the workflow decided for it
    (where a card was needed) and the approval it carries. Its cards are ``cards.take``'s: this
    is their desk (how a card is published, answered and the world read again here)."""

    settle_summary: str | None = None  # the settle timer has none in a team's history

    def __init__(self, run: GuardedRun, input: StartActivityInput, n: int) -> None:
        info = workflow.info()
        self.run, self.input, self.n, self.name = run, input, n, input.activity
        self.workflow_id = info.workflow_id
        self.key = keys.idempotency_key(info.workflow_id, key_tag(),
                                       keys.guard_call(_segment(info), n))
        self.values = wire_json(workflow.payload_converter(), input.args)
        self.step = StepReport(n=n, tool=self.name, plan_version=GUARD_VERSION,
                               effect=run.names[self.name].effect, state=StepState.EXECUTING,
                               timings=StepTimings(
                                   plan_made_at=run.report.begun_at or workflow.now()))
        run.report.steps.append(self.step)
        self.checked: Checked | None = None  # the guards the workflow decided (for a card)
        self.grant: ApprovalGrant | None = None
        self.superseded = 0  # times the policies moved between the decision and the call

    async def decide(self, again: bool = False) -> Checked:
        out = await self._check(CheckRequest(workflow_id=self.workflow_id, activity=self.name,
                                             n=self.n, values=self.values, key=self.key,
                                             again=again))
        if not again:
            self.step.effect, self.step.policy = out.effect, out.policy
            self.run.visible = self.run.visible or out.visible
        return out

    async def approved(self) -> bool:
        """Decided here, and a person's approval taken, where the call needs one."""
        self.checked = checked = await self.decide()
        if checked.refusal is not None:
            self._refuse(checked, checked.refusal_code, checked.refusal)
        if not checked.approval:
            return False
        self._record(Phase.PRE, checked.read)
        self._unless_held(checked, checked.read, "precondition_unmet", "before the call")
        self.run.answers.approvers = {}
        taken = await cards.take(self, checked)
        grant = cards.grant(taken.record) if taken is not None else None
        if taken is None or grant is None:
            self._refuse(self.checked, "approval_superseded", cards.SUPERSEDED)
        self.grant, self.checked = grant, taken.checked
        return True

    async def dispatched(self, start: Callable[[StartActivityInput], Any]) -> Any:
        """The activity's raw answer; dispatched again where the guard at the call asked a
        person, or the policies moved under the decision."""
        step, input = self.step, self.input
        while True:
            checked = self.checked
            header = GuardHeader(n=self.n, key=self.key, decided=checked is not None,
                                 grant=self.grant,
                                 policy_bundle=checked.policy_bundle if checked else None,
                                 wrap=True)
            step.state = StepState.EXECUTING
            step.timings.dispatched_at = workflow.now()
            try:
                said = header_payload(header)
                headers = sealed_headers(self.run.key, self.name, input.args,
                                         {**input.headers, HEADER: said}, vouched=said.data)
                return await start(replace(input, ret_type=RawValue, headers=headers))
            except ActivityError as e:
                refused = _refused_at_call(e)
                if await self._again(refused):
                    continue
                stop = self._failed(self.checked or await self.decide(), e, refused)
                if stop is None:
                    raise  # the team's own failure, as its activity raised it
                raise stop from e  # the activity's own failure its cause

    async def _again(self, refused: ToolFailure | None) -> bool:
        """Whether the call goes again after the guard at the call refused it."""
        code = refused.code if refused is not None else ""
        if code == "approval_missing" and self.grant is None and await self.approved():
            return True  # the policies asked a person at the call: approved, again
        if code == "policy_superseded" and self.superseded < REDECISIONS:
            # the policies moved between the decision and the call: decided again
            self.superseded += 1
            self.step.refusals.append(Refusal(status=412, code="policy_superseded"))
            self.checked, self.grant = None, None
            return True
        return False

    async def answered(self, raw: Any) -> Any:
        """The team's answer, once the guard's (off the same payload) is in the report and the
        post conditions, where there are any, held."""
        step, key = self.step, self.key
        answer, result = self._unwrapped(raw)
        step.effect = answer.effect
        self.run.visible = self.run.visible or answer.visible
        if answer.effect in LEDGERED:
            step.ledger = LedgerLink(key=key, answered=answer.ledger == "answered",
                                     owed=answer.ledger == "owed")
        # on the workflow's clock: dispatched, and answered
        step.timings.tool_started_at = step.timings.dispatched_at
        step.timings.tool_finished_at = workflow.now()
        self._record(Phase.AT_CALL, answer.checked)
        guard = Checked(effect=answer.effect, halts=answer.halts, args=answer.args,
                        post=answer.post)
        if answer.post:
            step.state = StepState.VERIFYING
            after = answer.after
            if after is None or after.unknown:  # no read, or one that could not answer
                after = await self._read(ReadRequest(
                    step=StepRef(run_id=self.workflow_id, plan_version=GUARD_VERSION, n=self.n,
                                 tool=self.name, args=answer.args),
                    conditions=answer.post, key=key))
            self._record(Phase.POST, after)
            self._unless_held(guard, after, "postcondition_unmet", "after the call")
        step.state = StepState.DONE
        self.run._show()
        return result

    def _unwrapped(self, raw: Any) -> tuple[GuardAnswer, Any]:
        """The guard's answer off the result payload, and the team's answer as their
        converter reads it."""
        if not isinstance(raw, RawValue):
            raise ApplicationError("the guarded activity's answer is not a payload",
                                   type="internal", non_retryable=True)
        payload = Payload()
        payload.CopyFrom(raw.payload)
        meta = payload.metadata.pop(ANSWER_META, None)
        if meta is None:
            raise ApplicationError(
                f"{self.name} answered without plangate's guard at the call (is the "
                "worker that ran it without PlangatePlugin?)", type="not_permitted",
                non_retryable=True)
        answer = GuardAnswer.model_validate_json(meta)
        value: Any = workflow.payload_converter().from_payload(
            payload, self.input.ret_type)  # type: ignore[arg-type]  # None: the converter's own guess
        return answer, value

    async def _check(self, req: CheckRequest) -> Checked:
        out = await workflow.execute_local_activity(
            TEAM_CHECK_ACTIVITY, req.model_dump_json(), result_type=str,
            start_to_close_timeout=LOCAL, retry_policy=LOCAL_RETRY,
            summary=f"plangate: guards of {req.activity} (call {req.n})",
        )
        return Checked.model_validate_json(out)

    async def _read(self, req: ReadRequest) -> ProbeReport:
        out = await workflow.execute_local_activity(
            TEAM_READ_ACTIVITY, req.model_dump_json(), result_type=str,
            start_to_close_timeout=LOCAL, retry_policy=LOCAL_RETRY,
            summary=f"plangate: post check of {req.step.tool} (call {req.step.n})",
        )
        return ProbeReport.model_validate_json(out)

    # -- its cards (``cards.Desk``) -------------------------------------------------------------
    def publish(self, checked: Checked) -> ApprovalRecord:
        step, report = self.step, self.run.report
        self.checked = checked
        now = workflow.now()
        self.run.answers.approvers = _keys(checked.approvers)
        card = ApprovalCard(
            run_id=report.run_id, plan_version=GUARD_VERSION, step=step.n, tool=step.tool,
            effect=checked.effect, args=checked.args, observed=_observed(checked),
            on_behalf_of=checked.on_behalf_of, policy_bundle=checked.policy_bundle,
            issued_at=now, expires_at=now + timedelta(seconds=checked.approval_ttl_s),
            idempotency_key=self.key, policy=checked.policy,
        )
        record = ApprovalRecord(step=step.n, plan_version=GUARD_VERSION, digest=card.digest(),
                                expires_at=card.expires_at, card=card)
        report.approvals.append(record)
        step.state = StepState.AWAITING_APPROVAL
        self.run._show()
        return record

    async def answer(self, record: ApprovalRecord, cards_: int) -> None:
        step = self.step
        await cards.wait(record, f"plangate: card of {step.tool} (call {step.n}) waits")
        step.state = StepState.PROBING
        self.run._show()
        if record.status is not CardStatus.APPROVED:
            assert self.checked is not None  # the card's, published from it
            self._refuse(self.checked, *cards.refusal(record))
        return None

    async def again(self) -> cards.Reread[Checked]:
        again = await self.decide(again=True)
        self._record(Phase.RE_PROBE, again.read)
        if again.refusal is not None:
            self._refuse(again, again.refusal_code, again.refusal)
        self._unless_held(again, again.read, "precondition_unmet", "after the approval")
        return cards.Reread(again, _observed(again))

    # -- its bookkeeping in the report ------------------------------------------------------------
    def _record(self, phase: Phase, read: ProbeReport | None) -> None:
        step = self.step
        if read is not None:
            step.checks.append(CheckRecord(phase=phase, attempt=1, results=read.results,
                                           read_at=read.read_at, elapsed_ms=read.elapsed_ms))
            if phase in (Phase.PRE, Phase.AT_CALL):
                step.timings.precheck_read_at = read.read_at

    def _unless_held(self, checked: Checked, read: ProbeReport | None, code: str,
                     when: str) -> None:
        if read is None or read.all_hold:
            return
        first = next(r for r in read.results if r.outcome is not Outcome.HOLDS)
        if first.outcome is Outcome.UNKNOWN:
            code = "probe_unknown"
        seen = json.dumps(first.observed) if first.observed is not None else "nothing"
        why = (f"{when}, {first.condition.key()} {first.outcome.value}: saw {seen}"
               + (f" ({first.detail})" if first.detail else ""))
        self._refuse(checked, code, why[:1000])

    def _refuse(self, checked: Checked, code: str, detail: str) -> NoReturn:
        step, run = self.step, self.run
        status = CODES[code].status if code in CODES else None
        step.state = StepState.HALTED if checked.halts else StepState.FAILED
        step.reason = detail
        run.report.failure = FailureRecord(step=step.n, tool=step.tool,
                                           plan_version=GUARD_VERSION, code=code, status=status,
                                           retryable=False, detail=detail)
        refused = (GuardHalted if checked.halts else GuardRefused)(step.tool, code, detail, status)
        if isinstance(refused, GuardHalted):
            run.halted = refused
        run._show()
        raise refused

    def _failed(self, checked: Checked, e: ActivityError,
                refused: ToolFailure | None) -> GuardRefused | None:
        """``refused``: the guard's refusal at the call (else the activity's own failure, or
        no answer); what the workflow is to raise for it (None: ``e`` itself)."""
        step, run = self.step, self.run
        cause = e.cause
        code = cause.type if isinstance(cause, ApplicationError) and cause.type else "lost"
        if refused is not None and isinstance(refused.data, dict) and "results" in refused.data:
            # what the check at the call read
            self._record(Phase.AT_CALL, ProbeReport.model_validate(refused.data))
        step.state = StepState.FAILED
        step.reason = (refused.detail if refused is not None else str(cause or e))[:1000]
        if refused is not None and refused.status in (403, 409, 412):
            step.refusals.append(Refusal(status=refused.status, code=refused.code))
        unknown = code == "outcome_unknown" or isinstance(cause, ActivityTimeout)
        halts = (checked.halts and refused is not None) or (
            checked.effect is Effect.MONEY and unknown)
        status = CODES[code].status if code in CODES else None
        if halts:
            step.state = StepState.HALTED
            run.halted = GuardHalted(step.tool, code, step.reason, status)
        run.report.failure = FailureRecord(
            step=step.n, tool=step.tool, plan_version=GUARD_VERSION, code=code,
            status=status, retryable=False, detail=step.reason)
        run._show()
        if refused is None:
            return None
        if run.halted is not None and halts:
            return run.halted
        return GuardRefused(step.tool, refused.code, refused.detail, refused.status)


def _refused_at_call(e: ActivityError) -> ToolFailure | None:
    """The guard's refusal at the call (plangate's code, its ``ToolFailure``), if that is what
    failed the activity."""
    cause = e.cause
    if not isinstance(cause, ApplicationError) or cause.type not in CODES or not cause.details:
        return None
    try:
        return ToolFailure.model_validate(cause.details[0])
    except ValueError:
        return None


def _segment(info: workflow.Info) -> str:
    """Which execution of a chain that continued as new the calls are of: their numbers begin
    again there, their keys must not. A reset keeps it (the history it replays began so), so a
    call made again after a reset has its first key and the effect ledger answers it."""
    if info.continued_run_id is None:
        return ""
    return hashlib.sha256(info.continued_run_id.encode()).hexdigest()[:8] + "."


def _observed(checked: Checked) -> dict[str, Any]:
    if checked.read is None:
        return {}
    return {r.condition.key(): r.observed for r in checked.read.results}


def _keys(approvers: dict[str, str]) -> dict[str, bytes]:
    import base64

    return {n: base64.b64decode(k) for n, k in approvers.items()}


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
