"""The card loop a person's approval takes, for a plan's step (``approval``) and a team's guarded
call (``plangate.temporal``) alike: settle, publish a card, wait for its answer, read the world
again; the same world as the card's is approved, a moved one is a new card, up to
``options.APPROVAL_CARDS`` in a row. A ``Desk`` is what differs between the two: how a card is
made and reported, how an answer is waited for and a refusal told, how the world is read again.
Workflow code: its commands (the settle timer, the wait's timer, the desk's reads) go into the
histories of plans and of teams' workflows alike, so a change here must replay both
(tests/test_replay.py, tests/test_replay_team.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, Protocol, TypeVar

from temporalio import workflow

from plangate.records import options
from plangate.records.approvals import ApprovalRecord, CardStatus
from plangate.records.proofs import ApprovalGrant

CARD_SETTLE = timedelta(milliseconds=1)
SUPERSEDED = f"the world moved under {options.APPROVAL_CARDS} approved cards in a row"

C = TypeVar("C")  # what a read of the world decided (the host's own record of it)
C_co = TypeVar("C_co", covariant=True)
S = TypeVar("S", covariant=True)  # how the host stops the loop (a value; or nothing: it raises)


@dataclass(frozen=True)
class Reread(Generic[C_co]):
    """The world read again after an answer, and what its probes observed."""

    checked: C_co
    observed: dict[str, Any]


@dataclass(frozen=True)
class Approved(Generic[C_co]):
    """The card approved and the read after it, which observed what the card did."""

    record: ApprovalRecord
    checked: C_co


class Desk(Protocol[C, S]):
    """Where a host's cards are published, answered and the world read again."""

    settle_summary: str | None  # the settle timer's (a team's history has none)

    def publish(self, checked: C) -> ApprovalRecord: ...

    async def answer(self, record: ApprovalRecord, cards: int) -> S | None:
        """None once ``record`` is approved."""
        ...

    async def again(self) -> Reread[C] | S: ...


async def take(desk: Desk[C, S], start: C | ApprovalRecord,
               first: int = 0) -> Approved[C] | S | None:
    """An approved card and the read after it; the desk's stop; or None: the world moved under
    every card. ``start``: the read a first card is published from, or a card an earlier run of
    the chain published, waiting still (``first``: the cards issued before it)."""
    checked = start
    for cards in range(first, options.APPROVAL_CARDS):
        if isinstance(checked, ApprovalRecord):
            record = checked
        else:
            await settle(desk.settle_summary)
            record = desk.publish(checked)
        stop = await desk.answer(record, cards)
        if stop is not None:
            return stop
        again = await desk.again()
        if not isinstance(again, Reread):
            return again
        if again.observed == record.card.observed:
            return Approved(record, again.checked)
        record.status = CardStatus.SUPERSEDED
        checked = again.checked
    return None


async def settle(summary: str | None) -> None:
    """Up to a workflow task the history begins (a timer's): the card's times, which its digest
    binds, are then what a replay computes too. Right after a local activity they need not be:
    the SDK may resolve it in a later activation live than on replay (sdk-python#1881), and a
    card issued there would replay with other times, its digest refusing the approver's answer
    and the grant the tool verifies."""
    await workflow.sleep(CARD_SETTLE, summary=summary)


async def wait(record: ApprovalRecord, summary: str,
               parking: Callable[[], bool] | None = None) -> None:
    """Until the card is answered (or ``parking()``); expired at its time."""
    try:
        await workflow.wait_condition(
            lambda: record.status is not CardStatus.PENDING or (
                parking is not None and parking()),
            timeout=record.expires_at - workflow.now(), timeout_summary=summary,
        )
    except TimeoutError:
        record.status = CardStatus.EXPIRED


def grant(record: ApprovalRecord) -> ApprovalGrant | None:
    """The approved card and its proof, for the tool's activity to verify again."""
    answer = record.answer
    if answer is None or answer.proof is None:
        return None
    others = [(a.proof, a.reason) for a in record.approvals if a.proof is not None]
    return ApprovalGrant(
        card=record.card, digest=record.digest, proof=answer.proof, reason=answer.reason,
        others=others,
    )


def refusal(record: ApprovalRecord) -> tuple[str, str]:
    """A card answered other than approved: the code and the sentence."""
    if record.status is CardStatus.REJECTED and record.answer is not None:
        who = record.answer.by or "someone"
        return "approval_rejected", (
            f"card {record.digest[:12]} rejected by {who}: {record.answer.reason}")
    return "approval_expired", (
        f"card {record.digest[:12]} expired unanswered at {record.expires_at.isoformat()}")
