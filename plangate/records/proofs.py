"""What an answer to a card and a submitted run carry to prove who sent them, and the one place
that judges those proofs (``answer_refusal``, ``submission_refusal``): the workflow's Update
validator and signal handler, and the tool's activity right before it acts, ask the same
questions of the same fields.

An approval proof binds the run, its plan version, the step, the card's digest, the decision,
its reason (a rejection's; an approval's, normally empty), the approver and the time it was
signed (with its time zone). A submission binds the
workflow id, the plan's SHA-256, the principal the run acts for and the time. A refusal says
what is wrong and never quotes the card's digest (nor any key).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import Field

from plangate.plans._base import Model
from plangate.plans.model import Plan
from plangate.plans.problem import Problem
from plangate.records import signing
from plangate.records.approvals import ApprovalCard, ApprovalDecision, ApprovalProof

# clocks of a signer and the worker may differ this much
CLOCK_SKEW = timedelta(minutes=5)
# an answer is signed to be sent: one older than this when it arrives is refused
ANSWER_MAX_AGE = timedelta(minutes=10)
# a run is submitted at most this long after its submitter signed it (a start with an old
# signature is a replay)
SUBMISSION_MAX_AGE = timedelta(minutes=10)


class ApprovalGrant(Model):
    """What a tool's activity is handed for a step a person approved: the card and the proof
    of its approval, verified again there before the tool acts."""

    card: ApprovalCard
    digest: str
    proof: ApprovalProof
    reason: str = ""  # the approval's, as signed (normally empty)
    # where the policy asks several distinct approvers: the others' proofs (and reasons)
    others: list[tuple[ApprovalProof, str]] = Field(default_factory=list)


def approval_fields(
    *, run_id: str, step: int, digest: str, decision: ApprovalDecision, reason: str, approver: str,
    signed_at: datetime,
) -> dict[str, object]:
    """What an approval proof signs (the digest covers the card: its plan version, tool,
    arguments, expiry, the call's idempotency key). The reason is signed whatever the
    decision: a reason recorded is always the one its approver signed (an approval's is
    normally empty, so proofs made before this still verify)."""
    return {
        "run_id": run_id, "step": step, "digest": digest,
        "decision": decision.value, "reason": reason,
        "approver": approver, "signed_at": signed_at.isoformat(),
    }


def sign_answer(
    key: signing.SigningKey, *, run_id: str, step: int, digest: str, decision: ApprovalDecision,
    reason: str, now: datetime,
) -> ApprovalProof:
    fields = approval_fields(
        run_id=run_id, step=step, digest=digest, decision=decision, reason=reason,
        approver=key.name, signed_at=now,
    )
    return ApprovalProof(
        approver=key.name, signed_at=now, signature=key.sign(signing.APPROVAL, fields)
    )


@dataclass(frozen=True)
class AnswerContext:
    """What the judge of an answer knows: the card it answers, the deployment's approvers
    (name -> public key), and who submitted the run (never its approver)."""

    card: ApprovalCard
    digest: str
    approvers: Mapping[str, bytes]
    submitter: str | None = None
    submitter_key: bytes | None = None


def answer_refusal(
    proof: ApprovalProof | None, decision: ApprovalDecision, reason: str, ctx: AnswerContext,
    now: datetime | None,
) -> str | None:
    """Why this answer does not count, or None. ``now``: the time it arrives (the validator's
    clock), to refuse a stale or future proof; None where only its binding matters (the tool's
    activity, later)."""
    card = ctx.card
    if proof is None:
        return (
            f"the answer to step {card.step} carries no approver's proof: an approval counts "
            "only when signed by an approver this deployment knows (plangate approve with "
            "PLANGATE_APPROVER_KEY, or the approval page)"
        )
    public = ctx.approvers.get(proof.approver)
    if public is None:
        return f"{proof.approver!r} is not an approver of this deployment (PLANGATE_APPROVERS)"
    if proof.approver == ctx.submitter or (
        ctx.submitter_key is not None and public == ctx.submitter_key
    ):
        return f"{proof.approver} submitted this run: a submitter never approves its own run"
    if proof.signed_at.utcoffset() is None:  # never compared with an aware time
        return f"the proof of {proof.approver} is signed at a time without a time zone"
    fields = approval_fields(
        run_id=card.run_id, step=card.step, digest=ctx.digest, decision=decision, reason=reason,
        approver=proof.approver, signed_at=proof.signed_at,
    )
    if not signing.verify(public, signing.APPROVAL, fields, proof.signature):
        return (
            f"the proof of {proof.approver} does not verify for this answer (another run, "
            "step, card, decision, reason or time, or another key)"
        )
    if not card.issued_at - CLOCK_SKEW <= proof.signed_at <= card.expires_at:
        return f"the proof of {proof.approver} was not signed while the card was valid"
    if now is not None:
        if proof.signed_at > now + CLOCK_SKEW:
            return f"the proof of {proof.approver} is signed in the future"
        if now - proof.signed_at > ANSWER_MAX_AGE:
            return f"the proof of {proof.approver} is older than {ANSWER_MAX_AGE}: sign again"
    return None


def grant_refusal(
    grant: ApprovalGrant | None, approvers: Mapping[str, bytes], *, run_id: str, step: int,
    plan_version: int, tool: str, args: Mapping[str, object], idempotency_key: str,
    submitter: str | None = None, submitter_key: bytes | None = None,
) -> str | None:
    """Why a call that needs a person's approval may not act on ``grant``: the card must be
    this very call (run, version, step, tool, arguments, idempotency key), its digest the
    card's, and its approval proven by an approver the deployment knows now."""
    if grant is None:
        return f"step {step} ({tool}) needs a person's approval and the call carries none"
    card = grant.card
    if grant.digest != card.digest():
        return "the approval's digest is not its card's"
    same = (
        card.run_id == run_id and card.step == step and card.plan_version == plan_version
        and card.tool == tool and card.args == dict(args)
        and card.idempotency_key == idempotency_key
    )
    if not same:
        return "the approved card is not this call (another run, step, tool or arguments)"
    ctx = AnswerContext(card, grant.digest, approvers, submitter, submitter_key)
    for proof, reason in [(grant.proof, grant.reason), *grant.others]:
        why = answer_refusal(proof, ApprovalDecision.APPROVE, reason, ctx, None)
        if why is not None:
            return why
    return None


def distinct_approvers(grant: ApprovalGrant | None, approvers: Mapping[str, bytes]) -> int:
    """How many distinct people a grant's proofs (each verified by ``grant_refusal``) prove:
    distinct public keys, not names (one key listed under two names is one person)."""
    if grant is None:
        return 0
    names = {grant.proof.approver, *(p.approver for p, _ in grant.others)}
    return len({approvers[n] for n in names if n in approvers})


def same_key_as(approver: str, earlier: list[str], approvers: Mapping[str, bytes]) -> str | None:
    """The name among ``earlier`` listed with ``approver``'s key (the same person under
    another name), if any."""
    key = approvers.get(approver)
    return next((n for n in earlier if key is not None and approvers.get(n) == key), None)


# -- submissions ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Submitter:
    """A party the deployment lets submit runs, and the principals it may act as."""

    name: str
    public: bytes
    principals: tuple[str, ...]


class Submission(Model):
    submitter: str = Field(max_length=63)
    workflow_id: str
    plan_sha256: str = Field(min_length=64, max_length=64)
    on_behalf_of: str | None = None
    signed_at: datetime
    signature: str = Field(max_length=200)


def plan_sha256(plan: Plan) -> str:
    """The plan as it was written (its declared fields), in canonical JSON."""
    data = json.dumps(
        plan.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(data.encode()).hexdigest()


def _submission_fields(s: Submission) -> dict[str, object]:
    return {
        "submitter": s.submitter, "workflow_id": s.workflow_id, "plan_sha256": s.plan_sha256,
        "on_behalf_of": s.on_behalf_of, "signed_at": s.signed_at.isoformat(),
    }


def sign_submission(
    key: signing.SigningKey, workflow_id: str, plan: Plan, now: datetime
) -> Submission:
    unsigned = Submission(
        submitter=key.name, workflow_id=workflow_id, plan_sha256=plan_sha256(plan),
        on_behalf_of=plan.on_behalf_of, signed_at=now, signature="",
    )
    sig = key.sign(signing.SUBMISSION, _submission_fields(unsigned))
    return unsigned.model_copy(update={"signature": sig})


def principal_refusal(
    submitter: Submitter, on_behalf_of: str | None
) -> Problem | None:
    """Whether ``submitter`` may submit a run acting for ``on_behalf_of``."""
    allowed = ", ".join(submitter.principals)
    if on_behalf_of is None:
        return Problem.at(
            None, "on_behalf_of", f"missing; this deployment binds principals to "
            f"submitters and {submitter.name} may act as {allowed}"
        )
    if on_behalf_of not in submitter.principals:
        return Problem.at(
            None, "on_behalf_of", f"{submitter.name} may not act as {on_behalf_of!r} "
            f"(only as {allowed})"
        )
    return None


def submission_refusal(
    sub: Submission | None, submitters: Mapping[str, Submitter], *, workflow_id: str,
    plan: Plan | None, on_behalf_of: str | None, started_at: datetime | None,
) -> str | None:
    """Why a run may not act on this submission, or None. ``plan``: compared by its SHA-256
    (None: not at hand, as in a tool's activity); ``started_at``: when Temporal started the
    run, to refuse an old signature (None: not judged)."""
    if sub is None:
        return (
            "the run carries no submitter's signature: this deployment takes runs only from "
            "the submitters it lists (PLANGATE_SUBMITTERS; sign with PLANGATE_SUBMITTER_KEY)"
        )
    who = submitters.get(sub.submitter)
    if who is None:
        return f"{sub.submitter!r} is not a submitter of this deployment (PLANGATE_SUBMITTERS)"
    if sub.signed_at.utcoffset() is None:  # never compared with the run's start
        return f"the submission of {sub.submitter} is signed at a time without a time zone"
    if not signing.verify(who.public, signing.SUBMISSION, _submission_fields(sub), sub.signature):
        return f"the submission of {sub.submitter} does not verify (another key or a changed run)"
    if sub.workflow_id != workflow_id:
        return f"the submission of {sub.submitter} is for another run"
    if plan is not None and sub.plan_sha256 != plan_sha256(plan):
        return f"the plan is not the one {sub.submitter} signed"
    if sub.on_behalf_of != on_behalf_of:
        return f"the run acts for {on_behalf_of!r}; {sub.submitter} signed for {sub.on_behalf_of!r}"
    if started_at is not None and not (
        started_at - SUBMISSION_MAX_AGE <= sub.signed_at <= started_at + CLOCK_SKEW
    ):
        return f"the submission of {sub.submitter} was not signed when the run was started"
    return principal_refusal(who, on_behalf_of)
