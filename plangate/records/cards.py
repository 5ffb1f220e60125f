"""The cards a run waits on, as its memo shows them: what a card list reads for every run in one
visibility query (``Plangate.pending_approvals``) instead of asking each run for its report.

The memo is written by the run's own workflow code (``workflows.showing``), but a memo can also
be set by whoever starts a workflow, so nothing in it is taken on its word: an entry counts only
when it names the execution that holds it and every card in it is the card its digest says
(``trusted``); otherwise the card list asks the run itself, as before.
"""

from __future__ import annotations

from plangate.plans._base import Model
from plangate.records.approvals import ApprovalRecord, CardStatus

CARDS_MEMO = "plangate.cards"


class CardsMemo(Model):
    execution: str  # the run id of the execution that wrote it
    goal: str
    cards: list[ApprovalRecord]  # pending, of the plan version in force


def trusted(memo: CardsMemo, workflow_id: str, run_id: str) -> list[ApprovalRecord] | None:
    """The memo's cards, if it was written by this execution and each card is what its digest
    was made of (of this run, its step and version); None if not: ask the run instead."""
    if memo.execution != run_id:
        return None
    for rec in memo.cards:
        card = rec.card
        if (
            card.run_id != workflow_id
            or card.step != rec.step
            or card.plan_version != rec.plan_version
            or card.expires_at != rec.expires_at
            or card.digest() != rec.digest
            or rec.status is not CardStatus.PENDING
        ):
            return None
    return memo.cards
