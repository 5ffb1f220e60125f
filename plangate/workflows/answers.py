"""Answers to a run's approval cards, by Update or signal: who may answer (the approvers and
the submitter the worker's guards name), the checks every answer meets, and the answer
recorded on its card. The step waiting for the card reads it there (``approval``).

An Update's validator judges an answer by the approvers the guards named (it cannot ask the
worker); where the answer is recorded, the worker is asked who is an approver now
(``guard.approvers``), so a key the deployment removed since
neither approves nor rejects, and nothing of its answer is recorded."""

from __future__ import annotations

import base64
from typing import Literal

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from plangate.records import options
from plangate.records.approvals import (
    Answered,
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalReceipt,
    ApprovalRecord,
    CardStatus,
)
from plangate.records.interface import APPROVERS_ACTIVITY
from plangate.records.proofs import AnswerContext, answer_refusal, same_key_as
from plangate.records.report import RunReport
from plangate.records.run import Approvers, ApproversRequest, Resolved
from plangate.workflows import summaries


class Answers:
    def __init__(self) -> None:
        self.approvers: dict[str, bytes] = {}
        self.submitter: str | None = None
        self.submitter_key: bytes | None = None

    def judged_by(self, resolved: Resolved) -> None:
        """Who may answer this run's cards, and who submitted it (``guard.resolve``)."""
        self.approvers = {n: base64.b64decode(k) for n, k in resolved.approvers.items()}
        self.submitter = resolved.submitter
        self.submitter_key = (
            base64.b64decode(resolved.submitter_key) if resolved.submitter_key else None
        )

    async def refusal_now(
        self, report: RunReport, answer: ApprovalAnswer, decision: ApprovalDecision
    ) -> str | None:
        """``refusal``, judged by the approvers the worker lists now (kept for the answers
        after it)."""
        listed: Approvers = await workflow.execute_local_activity(
            APPROVERS_ACTIVITY, ApproversRequest(workflow_id=workflow.info().workflow_id),
            result_type=Approvers, start_to_close_timeout=options.GUARD_TIMEOUT,
            retry_policy=options.GUARD_RETRY,
            summary=summaries.approvers(answer.step, report.plan_version),
        )
        self.approvers = {n: base64.b64decode(k) for n, k in listed.approvers.items()}
        # judged again whole: the card may have been answered or expired meanwhile
        return self.refusal(report, answer, decision)

    def refusal(
        self, report: RunReport, answer: ApprovalAnswer, decision: ApprovalDecision
    ) -> str | None:
        """Why ``answer`` is not taken; None when it is."""
        record = pending(report, answer.step)
        if record is None:
            return f"no card for step {answer.step} in plan version {report.plan_version}"
        if record.status is not CardStatus.PENDING:
            done = record.answer.decision if record.answer else record.status
            return f"the card of step {answer.step} is no longer waiting: {done}"
        if answer.digest != record.digest:
            # never the card's own digest: whoever guesses learns nothing
            return f"wrong digest for step {answer.step}: it is not the card that waits"
        if workflow.now() >= record.expires_at:
            return f"the card of step {answer.step} expired at {record.expires_at.isoformat()}"
        if decision is ApprovalDecision.REJECT and not answer.reason.strip():
            return "a rejection needs a reason"
        if record.approvals and answer.proof is not None:
            # distinct people are distinct keys: one key listed under two names is one
            who = answer.proof.approver
            if who in record.approved_by():
                return (f"{who} approved the card of step {answer.step} already: it waits "
                        f"for {record.needed} distinct approvers")
            twin = same_key_as(who, record.approved_by(), self.approvers)
            if twin is not None:
                return (f"{who}'s key approved the card of step {answer.step} already (as "
                        f"{twin}): it waits for {record.needed} distinct approvers' keys")
        # an answer counts only with an approver's proof
        ctx = AnswerContext(
            record.card, record.digest, self.approvers, self.submitter, self.submitter_key
        )
        return answer_refusal(answer.proof, decision, answer.reason, ctx, workflow.now())

    def apply(
        self,
        report: RunReport,
        answer: ApprovalAnswer,
        decision: ApprovalDecision,
        via: Literal["update", "signal"],
    ) -> ApprovalReceipt:
        record = pending(report, answer.step)
        if record is None or record.status is not CardStatus.PENDING:
            raise ApplicationError("the card is no longer waiting", non_retryable=True)
        now = workflow.now()
        proof = answer.proof
        by = proof.approver if proof is not None else answer.by  # the proven name, not a claim
        given = Answered(decision=decision, by=by, reason=answer.reason, at=now, proof=proof)
        if decision is ApprovalDecision.APPROVE and len(record.approvals) + 1 < record.needed:
            # one of several distinct approvers the policy asks: the card waits on
            record.approvals.append(given)
            return ApprovalReceipt(
                step=answer.step, digest=record.digest, decision=decision, at=now, via=via
            )
        record.answer = given
        record.status = (
            CardStatus.APPROVED if decision is ApprovalDecision.APPROVE else CardStatus.REJECTED
        )
        return ApprovalReceipt(
            step=answer.step, digest=record.digest, decision=decision, at=now, via=via
        )


def pending(report: RunReport, step: int) -> ApprovalRecord | None:
    """The card of ``step`` in the current plan version, if it has one."""
    for record in reversed(report.approvals):
        if record.step == step and record.plan_version == report.plan_version:
            return record
    return None
