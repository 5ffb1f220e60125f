"""AWAITING_APPROVAL: a person approves the exact effect. A card (what, to what, as whom, until
when) and its digest are published; after the answer the step reads the world again, the
instant before the call: an approval lengthens the window, it never replaces the check. The
answers themselves arrive by Update or signal (``answers``)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

from temporalio import workflow

from plangate.records import options
from plangate.records.approvals import ApprovalCard, ApprovalRecord, CardStatus
from plangate.records.proofs import ApprovalGrant
from plangate.records.report import Phase, StepState
from plangate.records.run import Parked, ParkedAt
from plangate.workflows import bookkeeping, metrics, summaries
from plangate.workflows.probing import check_before
from plangate.workflows.router import Kind, route
from plangate.workflows.step import (
    Attempt,
    Checked,
    Failed,
    Park,
    Prepared,
    StepScope,
    observed,
)

CARD_SETTLE = timedelta(milliseconds=1)


async def approve(
    s: StepScope, base: Prepared, checked: Checked | None, resume: Parked | None = None
) -> Prepared | Attempt:
    """The call, approved, with the version its last read observed and the proof of the
    approval; or why not. If what the probes observe changed since the card, the approval no
    longer matches: a new card. ``resume``: the card an earlier run of the chain issued is
    waiting still."""
    first = resume.cards if resume is not None else 0
    for cards in range(first, options.APPROVAL_CARDS):
        if checked is None:
            record = _waiting_card(s)
        else:
            await _settle(s)
            record = _publish(s, s.carry_version(base, checked), checked)
        refused = await _await_answer(s, record, cards)
        if refused is not None:
            return refused
        again = await check_before(s, base, Phase.RE_PROBE)
        if not isinstance(again, Checked):
            return again
        if observed(again.results) == record.card.observed:
            return replace(s.carry_version(base, again), grant=_grant(s, record))
        record.status = CardStatus.SUPERSEDED
        checked = again
    d = route(s.situation(Kind.APPROVAL_REFUSED))
    why = f"the world moved under {options.APPROVAL_CARDS} approved cards in a row"
    return Failed(d, s.failure("approval_superseded", False, why))


def _grant(s: StepScope, record: ApprovalRecord) -> ApprovalGrant | None:
    """The approved card and its proof, for the tool's activity to verify again."""
    answer = record.answer
    if answer is None or answer.proof is None:
        return None
    others = [(a.proof, a.reason) for a in record.approvals if a.proof is not None]
    return ApprovalGrant(
        card=record.card, digest=record.digest, proof=answer.proof, reason=answer.reason,
        others=others,
    )


async def _settle(s: StepScope) -> None:
    """Up to a workflow task the history begins (a timer's): the card's times, which its digest
    binds, are then what a replay computes too. Right after a local activity they need not be:
    the SDK may resolve it in a later activation live than on replay (sdk-python#1881), and a
    card issued there would replay with other times, its digest refusing the approver's answer
    and the grant the tool verifies."""
    await workflow.sleep(CARD_SETTLE, summary=summaries.card(s.n, s.ctx.version))


def _publish(s: StepScope, p: Prepared, checked: Checked) -> ApprovalRecord:
    ctx = s.ctx
    now = workflow.now()
    card = ApprovalCard(
        run_id=ctx.run_id, plan_version=ctx.version, step=s.n, tool=s.step.tool,
        effect=s.effect, args=p.args, observed=observed(checked.results),
        on_behalf_of=ctx.on_behalf_of, policy_bundle=ctx.policy_bundle, issued_at=now,
        expires_at=now + timedelta(seconds=ctx.guarded.approval_ttl_s),
        idempotency_key=p.key, policy=s.guard.policy,
    )
    record = ApprovalRecord(
        step=s.n, plan_version=ctx.version, digest=card.digest(), expires_at=card.expires_at,
        card=card,
    )
    ctx.report.approvals.append(record)
    metrics.approval_requested(s.step.tool)
    s.set_state(StepState.AWAITING_APPROVAL)
    bookkeeping.refresh_status(ctx.report)
    return record


def _waited(record: ApprovalRecord) -> float:
    return (workflow.now() - record.card.issued_at).total_seconds() * 1000


def _waiting_card(s: StepScope) -> ApprovalRecord:
    for record in reversed(s.ctx.report.approvals):
        if (record.step, record.plan_version) == (s.n, s.ctx.version):
            return record
    raise RuntimeError(f"step {s.n} parked at its approval, but it has no card")


async def _await_answer(s: StepScope, record: ApprovalRecord, cards: int) -> Failed | Park | None:
    """None once the card is approved."""
    ctx = s.ctx
    parked = s.parked(ParkedAt.APPROVAL, cards=cards)
    if record.status is CardStatus.PENDING and ctx.over_bound():
        return Park(parked)
    try:
        await workflow.wait_condition(
            lambda: record.status is not CardStatus.PENDING or ctx.parking,
            timeout=record.expires_at - workflow.now(),
            timeout_summary=summaries.approval_wait(s.n, ctx.version, record.expires_at),
        )
    except TimeoutError:
        record.status = CardStatus.EXPIRED
    except asyncio.CancelledError:  # the run was cancelled: the card waits no longer
        metrics.approval_answered(s.step.tool, "cancelled", _waited(record))
        raise
    if record.status is CardStatus.PENDING:  # the run continues as new: the card carries
        return Park(parked)
    waited = _waited(record)
    ctx.report.sample("approval_wait_ms", waited)
    metrics.approval_answered(s.step.tool, record.status.value, waited)
    bookkeeping.refresh_status(ctx.report)
    if record.status is CardStatus.APPROVED:
        return None
    d = route(s.situation(Kind.APPROVAL_REFUSED))
    if record.status is CardStatus.REJECTED and record.answer is not None:
        who = record.answer.by or "someone"
        why = f"card {record.digest[:12]} rejected by {who}: {record.answer.reason}"
        return Failed(d, s.failure("approval_rejected", False, why))
    why = f"card {record.digest[:12]} expired unanswered at {record.expires_at.isoformat()}"
    return Failed(d, s.failure("approval_expired", False, why))
