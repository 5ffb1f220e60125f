"""Answering a card: an answer signed with an approver's key, sent as the run's ``approve`` or
``reject`` Update; a refusal is told apart from any other failure by its type, never its
message."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from plangate.client import reports
from plangate.client.errors import AnswerRefused, NoApproverKey, RunEnded, UnknownRun
from plangate.client.handles import description, handle
from plangate.records.approvals import ApprovalAnswer, ApprovalDecision, ApprovalReceipt, CardStatus
from plangate.records.interface import ANSWER_REFUSED_ERROR
from plangate.records.proofs import sign_answer
from plangate.records.report import RunReport
from plangate.records.signing import SigningKey
from plangate.world.settings import APPROVER_KEY_VAR, Settings

# The types of the ApplicationError an answer the run refused fails its Update with: the
# validator's ValueError (named by its class), the handler's ``AnswerRefused`` (its approver
# is no longer one), and the untyped error of a card answered meanwhile. Any other (a worker
# that has no such Update, an answer it cannot decode) is not a refusal: it is raised as is.
REFUSALS = frozenset({"ValueError", ANSWER_REFUSED_ERROR, None})


def approver_key(settings: Settings, name: str = "") -> SigningKey:
    keys = settings.identity.approver_keys
    if not keys:
        raise NoApproverKey(
            f"no approver key: set {APPROVER_KEY_VAR} to your key file (`plangate key new "
            "NAME` makes one; the deployment lists its public line in PLANGATE_APPROVERS)"
        )
    if name:
        for k in keys:
            if k.name == name:
                return k
        raise NoApproverKey(
            f"no approver key named {name!r} in {APPROVER_KEY_VAR} (it holds "
            f"{', '.join(k.name for k in keys)})"
        )
    return keys[0]


def signed_answer(
    settings: Settings, run_id: str, step: int, digest: str, decision: ApprovalDecision,
    reason: str, by: str, at: datetime | None,
) -> ApprovalAnswer:
    key = approver_key(settings, by)
    proof = sign_answer(
        key, run_id=run_id, step=step, digest=digest, decision=decision, reason=reason,
        now=at or datetime.now(UTC),
    )
    return ApprovalAnswer(
        step=step, digest=digest, decision=decision, by=key.name, reason=reason, proof=proof
    )


async def answer(
    client: Client, settings: Settings, run_id: str, update: str, given: ApprovalAnswer
) -> ApprovalReceipt:
    """Send ``given`` as Update ``update`` of the run: its receipt."""
    await description(client, run_id)
    update_id = f"answer-{uuid.uuid4().hex}"
    try:
        receipt: ApprovalReceipt = await handle(client, run_id).execute_update(
            update, given, id=update_id, result_type=ApprovalReceipt
        )
    except WorkflowUpdateFailedError as e:
        cause = e.cause
        if isinstance(cause, ApplicationError) and cause.type in REFUSALS:
            raise AnswerRefused(cause.message or str(e)) from None
        raise
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise await ended(client, settings, run_id, given.step, given.digest) from None
        raise
    except Exception:
        # The workflow may have taken the answer and only its receipt does not read here
        # (written by a worker with other keys): an answer recorded is never an error.
        recorded = await _recorded(client, run_id, update_id, given)
        if recorded is None:
            raise
        return recorded
    return receipt


async def _recorded(
    client: Client, run_id: str, update_id: str, given: ApprovalAnswer
) -> ApprovalReceipt | None:
    """The receipt of update ``update_id`` from the run's history when the workflow
    completed it successfully (it passed the validator and the card took the answer),
    else None. Read without decoding a payload: the one that did not decode is the receipt."""
    async for event in handle(client, run_id).fetch_history_events():
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            continue
        done = event.workflow_execution_update_completed_event_attributes
        if done.meta.update_id == update_id and done.outcome.HasField("success"):
            return ApprovalReceipt(
                step=given.step, digest=given.digest, decision=given.decision,
                at=event.event_time.ToDatetime(UTC),
            )
    return None


async def ended(
    client: Client, settings: Settings, run_id: str, step: int, digest: str
) -> RunEnded:
    """Why an answer to an ended run is refused: what became of its card."""
    try:
        rep = await reports.report(client, settings, run_id)
    except (RPCError, UnknownRun):
        return RunEnded(f"run {run_id!r} has ended: no card waits for an answer")
    fate = card_fate(rep, step, digest)
    return RunEnded(f"run {run_id!r} has ended ({rep.status.value}): {fate}")


def card_fate(rep: RunReport, step: int, digest: str) -> str:
    """What became of the card ``digest`` of ``step``, from the run report, in a few words."""
    for a in reversed(rep.approvals):
        if a.digest != digest:
            continue
        if a.status is CardStatus.SUPERSEDED:
            return f"the card of step {a.step} was superseded by a new card (the world moved)"
        if a.answer is not None:
            x = a.answer
            return (
                f"the card of step {a.step} was already answered: {x.decision} by "
                f"{x.by or 'someone'} at {x.at.isoformat()}"
            )
        if a.status is CardStatus.EXPIRED:
            return f"the card of step {a.step} expired unanswered at {a.expires_at.isoformat()}"
        return f"the card of step {a.step} was never answered"
    return f"no card of step {step} has digest {digest}"
