"""Approval cards: a person approves the exact effect a step will have, not a description of it.

A card holds what will happen (tool, fully bound arguments, effect), to what (the versions the
step's pre probes observed), under whose authority and policy, and until when. Its identity is
the SHA-256 of its canonical JSON: an answer names the digest it approves, so a card that
changed is a different card.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import Field, JsonValue

from plangate.plans._base import Model
from plangate.plans.guards import PolicyMark
from plangate.plans.model import Effect


class ApprovalCard(Model):
    run_id: str
    plan_version: int
    step: int
    tool: str
    effect: Effect
    args: dict[str, JsonValue]  # fully bound, the version a write will carry included
    observed: dict[str, JsonValue] = Field(default_factory=dict)  # condition -> what it saw
    on_behalf_of: str | None = None
    policy_bundle: str | None = None
    issued_at: datetime
    expires_at: datetime
    # the call's idempotency key: an approval is of this one call, never of a repeat of it
    # under another key (cards published before it have none, and digest as they did)
    idempotency_key: str | None = None
    # what the deployment's Cedar policies decided of the call (PLANGATE_POLICIES): why it
    # waits, naming the policies (cards without one digest as they did)
    policy: PolicyMark | None = None

    def canonical(self) -> bytes:
        data = self.model_dump(mode="json")
        if self.idempotency_key is None:
            del data["idempotency_key"]
        if self.policy is None:
            del data["policy"]
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    def digest(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()


class CardStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"  # approved, but the world moved before the call: a new card


class ApprovalDecision(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"


class ApprovalProof(Model):
    """Who answered, proven: an approver's signature over the answer (``records.proofs``)."""

    approver: str = Field(max_length=63)
    signed_at: datetime
    signature: str = Field(max_length=200)


class ApprovalAnswer(Model):
    """What a person answers (the ``approve`` / ``reject`` Updates, or the ``answer`` signal).
    ``by`` is what an unsigned answer claimed before answers were signed; what counts is the
    approver its ``proof`` names."""

    step: int
    digest: str = Field(min_length=64, max_length=64)
    decision: ApprovalDecision = ApprovalDecision.APPROVE
    by: str = Field(default="", max_length=200)
    reason: str = Field(default="", max_length=2000)
    proof: ApprovalProof | None = None


class Answered(Model):
    decision: ApprovalDecision
    by: str = ""  # the approver whose proof verified (before proofs: the name it claimed)
    reason: str = ""
    at: datetime
    proof: ApprovalProof | None = None


class RefusedAnswer(Model):
    """An answer sent as a signal that the checks refused: recorded, and ignored."""

    answer: ApprovalAnswer
    why: str
    at: datetime


class ApprovalRecord(Model):
    step: int
    plan_version: int
    digest: str
    expires_at: datetime
    card: ApprovalCard
    status: CardStatus = CardStatus.PENDING
    answer: Answered | None = None
    # approvals taken before the last one needed, where the policy asks several distinct
    # approvers (``needed``): the card waits on until the last
    approvals: list[Answered] = Field(default_factory=list)

    @property
    def needed(self) -> int:
        """How many distinct approvers approve this card (the policy's word; else one)."""
        policy = self.card.policy
        return max(1, policy.approvers) if policy is not None else 1

    def approved_by(self) -> list[str]:
        return [a.by for a in self.approvals]


class ApprovalReceipt(Model):
    """What an accepted Update returns."""

    step: int
    digest: str
    decision: ApprovalDecision
    at: datetime
    via: Literal["update", "signal"] = "update"
