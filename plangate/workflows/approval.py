"""AWAITING_APPROVAL: a person approves the exact effect. A card (what, to what, as whom, until
when) and its digest are published; after the answer the step reads the world again, the
instant before the call: an approval lengthens the window, it never replaces the check. The
answers themselves arrive by Update or signal (``answers``)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

from temporalio import workflow

from plangate.records.approvals import ApprovalCard, ApprovalRecord, CardStatus
from plangate.records.report import Phase, StepState
from plangate.records.run import Parked, ParkedAt
from plangate.workflows import bookkeeping, cards, granting, metrics, summaries
from plangate.workflows.probing import check_before
from plangate.workflows.router import Kind, route
from plangate.workflows.step import (
    Attempt,
    Failed,
    Held,
    Park,
    Prepared,
    StepScope,
    observed,
)


async def approve(
    s: StepScope, base: Prepared, checked: Held | None, resume: Parked | None = None
) -> Prepared | Attempt:
    """The call, approved, with the version its last read observed and the proof of the
    approval; or why not. If what the probes observe changed since the card, the approval no
    longer matches: a new card. ``resume``: the card an earlier run of the chain issued is
    waiting still. A standing grant that covers the call stands for the card: the call goes,
    no card published (``granting``)."""
    first = resume.cards if resume is not None else 0
    if checked is not None:  # a standing grant in place of a card
        p = s.carry_version(base, checked)
        s.rep.grant = await granting.covered(s, p)
        if s.rep.grant is not None:
            return p
    desk: cards.Desk[Held, Attempt] = _StepDesk(s, base)
    # a chain resumed at its card: first < options.APPROVAL_CARDS, the card is waited for
    taken = await cards.take(desk, checked if checked is not None else _waiting_card(s), first)
    if isinstance(taken, cards.Approved):
        return replace(s.carry_version(base, taken.checked), grant=cards.grant(taken.record))
    if taken is not None:
        return taken
    d = route(s.situation(Kind.APPROVAL_REFUSED))
    return Failed(d, s.failure("approval_superseded", False, cards.SUPERSEDED))


class _StepDesk:
    """A plan step's cards: in the run's report, answered by Update or signal, parked where
    the run continues as new, the world read again by the step's probes."""

    def __init__(self, s: StepScope, base: Prepared) -> None:
        self.s, self.base = s, base
        self.settle_summary: str | None = summaries.card(s.n, s.ctx.version)

    def publish(self, checked: Held) -> ApprovalRecord:
        s = self.s
        ctx, p = s.ctx, s.carry_version(self.base, checked)
        now = workflow.now()
        card = ApprovalCard(
            run_id=ctx.run_id, plan_version=ctx.version, step=s.n, tool=s.step.tool,
            effect=s.effect, args=p.args, observed=observed(checked.results),
            on_behalf_of=ctx.on_behalf_of, policy_bundle=ctx.policy_bundle, issued_at=now,
            expires_at=now + timedelta(seconds=ctx.guarded.approval_ttl_s),
            idempotency_key=p.key, policy=s.guard.policy,
        )
        record = ApprovalRecord(
            step=s.n, plan_version=ctx.version, digest=card.digest(),
            expires_at=card.expires_at, card=card,
        )
        ctx.report.approvals.append(record)
        metrics.approval_requested(s.step.tool)
        s.set_state(StepState.AWAITING_APPROVAL)
        bookkeeping.refresh_status(ctx.report)
        return record

    async def answer(self, record: ApprovalRecord, cards_: int) -> Failed | Park | None:
        s = self.s
        ctx = s.ctx
        parked = s.parked(ParkedAt.APPROVAL, cards=cards_)
        if record.status is CardStatus.PENDING and ctx.over_bound():
            return Park(parked)
        try:
            await cards.wait(record, summaries.approval_wait(s.n, ctx.version, record.expires_at),
                             parking=lambda: ctx.parking)
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
        code, why = cards.refusal(record)
        return Failed(route(s.situation(Kind.APPROVAL_REFUSED)), s.failure(code, False, why))

    async def again(self) -> cards.Reread[Held] | Attempt:
        again = await check_before(self.s, self.base, Phase.RE_PROBE)
        if not isinstance(again, Held):
            return again
        return cards.Reread(again, observed(again.results))


def _waited(record: ApprovalRecord) -> float:
    return (workflow.now() - record.card.issued_at).total_seconds() * 1000


def _waiting_card(s: StepScope) -> ApprovalRecord:
    for record in reversed(s.ctx.report.approvals):
        if (record.step, record.plan_version) == (s.n, s.ctx.version):
            return record
    raise RuntimeError(f"step {s.n} parked at its approval, but it has no card")
