"""One guarded call of a team's workflow (``workflow_guard.GuardedRun.call``): its step in
the run's report, the guards the workflow decided for it where a card was needed, the approval
it carries, its dispatch with the guard's sealed header, and the guard's answer read off the
activity's result. Its cards are ``workflows.cards``'s loop, the plan step's own; its report
entries are ``workflows.bookkeeping``'s. What is its own: how the call is intercepted (a
``StartActivityInput``) and answered (``GuardRefused``/``GuardHalted`` raised into the team's
code)."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeout
from temporalio.worker import StartActivityInput

from plangate.plans.model import LEDGERED, Effect
from plangate.records import keys
from plangate.records.approvals import ApprovalCard, ApprovalRecord, CardStatus
from plangate.records.calls import Outcome, ProbeReport, StepRef, ToolFailure
from plangate.records.codes import CODES
from plangate.records.interface import TEAM_CHECK_ACTIVITY, TEAM_READ_ACTIVITY
from plangate.records.proofs import ApprovalGrant
from plangate.records.report import FailureRecord, Phase, StepReport, StepState, StepTimings
from plangate.temporal.calls import (
    ANSWER_META,
    GUARD_VERSION,
    HEADER,
    CheckRequest,
    GuardAnswer,
    GuardCheck,
    GuardHeader,
    ReadRequest,
    header_payload,
    wire_json,
)
from plangate.temporal.errors import GuardHalted, GuardRefused
from plangate.workflows import bookkeeping, cards
from plangate.workflows.context import key_tag
from plangate.workflows.router import Refused
from plangate.workflows.sealing import sealed_headers
from plangate.workflows.step import observed

if TYPE_CHECKING:
    from plangate.temporal.workflow_guard import GuardedRun

LOCAL = timedelta(seconds=30)
LOCAL_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=5), maximum_attempts=5)
REDECISIONS = 2  # times a call is decided again when the policies in force moved under it


class TeamCall:
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
                               effect=run.names[self.name].effect,
                               timings=StepTimings(
                                   plan_made_at=run.report.begun_at or workflow.now()))
        bookkeeping.set_state(self.step, StepState.EXECUTING)
        run.report.steps.append(self.step)
        self.checked: GuardCheck | None = None  # the guards the workflow decided (for a card)
        self.grant: ApprovalGrant | None = None
        self.superseded = 0  # times the policies moved between the decision and the call

    async def decide(self, again: bool = False) -> GuardCheck:
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
            if step.state is not StepState.EXECUTING:
                bookkeeping.set_state(step, StepState.EXECUTING)
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
            bookkeeping.count_answer(self.run.report, self.step, Refused.SUPERSEDED, 412,
                                     "policy_superseded")
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
            bookkeeping.record_ledger(step, key, answer.ledger)
        # on the workflow's clock: dispatched, and answered
        step.timings.tool_started_at = step.timings.dispatched_at
        step.timings.tool_finished_at = workflow.now()
        self._record(Phase.AT_CALL, answer.checked)
        guard = GuardCheck(effect=answer.effect, halts=answer.halts, args=answer.args,
                        post=answer.post)
        if answer.post:
            bookkeeping.set_state(step, StepState.VERIFYING)
            after = answer.after
            if after is None or after.unknown:  # no read, or one that could not answer
                after = await self._read(ReadRequest(
                    step=StepRef(run_id=self.workflow_id, plan_version=GUARD_VERSION, n=self.n,
                                 tool=self.name, args=answer.args),
                    conditions=answer.post, key=key))
            self._record(Phase.POST, after)
            self._unless_held(guard, after, "postcondition_unmet", "after the call")
        bookkeeping.set_state(step, StepState.DONE)
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

    async def _check(self, req: CheckRequest) -> GuardCheck:
        return GuardCheck.model_validate_json(await local(
            TEAM_CHECK_ACTIVITY, req.model_dump_json(),
            f"plangate: guards of {req.activity} (call {req.n})"))

    async def _read(self, req: ReadRequest) -> ProbeReport:
        return ProbeReport.model_validate_json(await local(
            TEAM_READ_ACTIVITY, req.model_dump_json(),
            f"plangate: post check of {req.step.tool} (call {req.step.n})"))

    # -- its cards (``cards.Desk``) -------------------------------------------------------------
    def publish(self, checked: GuardCheck) -> ApprovalRecord:
        step, report = self.step, self.run.report
        self.checked = checked
        now = workflow.now()
        self.run.answers.approvers = approver_keys(checked.approvers)
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
        bookkeeping.set_state(step, StepState.AWAITING_APPROVAL)
        self.run._show()
        return record

    async def answer(self, record: ApprovalRecord, cards_: int) -> None:
        step = self.step
        await cards.wait(record, f"plangate: card of {step.tool} (call {step.n}) waits")
        bookkeeping.set_state(step, StepState.PROBING)
        self.run._show()
        if record.status is not CardStatus.APPROVED:
            assert self.checked is not None  # the card's, published from it
            self._refuse(self.checked, *cards.refusal(record))
        return None

    async def again(self) -> cards.Reread[GuardCheck]:
        again = await self.decide(again=True)
        self._record(Phase.RE_PROBE, again.read)
        if again.refusal is not None:
            self._refuse(again, again.refusal_code, again.refusal)
        self._unless_held(again, again.read, "precondition_unmet", "after the approval")
        return cards.Reread(again, _observed(again))

    # -- its bookkeeping in the report ------------------------------------------------------------
    def _record(self, phase: Phase, read: ProbeReport | None) -> None:
        if read is not None:
            bookkeeping.record_check(self.run.report, self.step, phase, 1, read)
            if phase in (Phase.PRE, Phase.AT_CALL):
                self.step.timings.precheck_read_at = read.read_at

    def _unless_held(self, checked: GuardCheck, read: ProbeReport | None, code: str,
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

    def _refuse(self, checked: GuardCheck, code: str, detail: str) -> NoReturn:
        """Refused by the workflow's own check: raised into the team's code."""
        halted = self._fail(code, detail, checked.halts)
        raise halted or GuardRefused(self.step.tool, code, detail, _status(code))

    def _fail(self, code: str, detail: str, halts: bool) -> GuardHalted | None:
        """The step failed with ``code`` (the run's failure); halted where ``halts`` (the run
        fails whatever the team's code catches: the halt returned)."""
        step, run, status = self.step, self.run, _status(code)
        bookkeeping.set_state(step, StepState.HALTED if halts else StepState.FAILED)
        step.reason = detail
        run.report.failure = FailureRecord(step=step.n, tool=step.tool,
                                           plan_version=GUARD_VERSION, code=code, status=status,
                                           retryable=False, detail=detail)
        if halts:
            run.halted = GuardHalted(step.tool, code, detail, status)
        run._show()
        return run.halted if halts else None

    def _failed(self, checked: GuardCheck, e: ActivityError,
                refused: ToolFailure | None) -> GuardRefused | None:
        """``refused``: the guard's refusal at the call (else the activity's own failure, or
        no answer); what the workflow is to raise for it (None: ``e`` itself)."""
        cause = e.cause
        code = cause.type if isinstance(cause, ApplicationError) and cause.type else "lost"
        if refused is not None and isinstance(refused.data, dict) and "results" in refused.data:
            # what the check at the call read
            self._record(Phase.AT_CALL, ProbeReport.model_validate(refused.data))
        if refused is not None:
            bookkeeping.count_answer(self.run.report, self.step, Refused.of(refused.status),
                                     refused.status, refused.code)
        unknown = code == "outcome_unknown" or isinstance(cause, ActivityTimeout)
        halts = (checked.halts and refused is not None) or (
            checked.effect is Effect.MONEY and unknown)
        detail = (refused.detail if refused is not None else str(cause or e))[:1000]
        halted = self._fail(code, detail, halts)
        if refused is None:
            return None
        return halted or GuardRefused(self.step.tool, refused.code, refused.detail,
                                      refused.status)


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


async def local(activity: str, arg: str, summary: str) -> str:
    """One of plangate's local activities in the team's workflow (JSON in, JSON out)."""
    out: str = await workflow.execute_local_activity(
        activity, arg, result_type=str, start_to_close_timeout=LOCAL, retry_policy=LOCAL_RETRY,
        summary=summary)
    return out


def _status(code: str) -> int | None:
    return CODES[code].status if code in CODES else None


def _segment(info: workflow.Info) -> str:
    """Which execution of a chain that continued as new the calls are of: their numbers begin
    again there, their keys must not. A reset keeps it (the history it replays began so), so a
    call made again after a reset has its first key and the effect ledger answers it."""
    if info.continued_run_id is None:
        return ""
    return hashlib.sha256(info.continued_run_id.encode()).hexdigest()[:8] + "."


def _observed(checked: GuardCheck) -> dict[str, Any]:
    return observed(checked.read.results) if checked.read is not None else {}


def approver_keys(approvers: dict[str, str]) -> dict[str, bytes]:
    """The approvers a card lists, as the worker sent them (name: base64 public key)."""
    return {n: base64.b64decode(k) for n, k in approvers.items()}
