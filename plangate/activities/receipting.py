"""The receipt of a ledgered call (``records.receipts``), made by the tool's activity where the
call concludes: every fact in it is the worker's own (what it verified, decided, read and got
back), none taken from the request's word. Signed with the worker's receipt key
(``PLANGATE_RECEIPT_KEY``); without one, no receipt is made.

Kept in ``plangate.receipts`` (``world.receipts``) as bookkeeping: one try, then owed to
Postgres (``world.owed``; at once where the call's outcome was just owed: Postgres is away); a
receipt that cannot be written never fails the call nor changes what it reports.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import JsonValue

from plangate.activities.tools.registry import ToolSpec
from plangate.plans.amounts import moved
from plangate.records import receipts
from plangate.records.calls import ProbeReport, ToolCall
from plangate.records.grants import GrantSeen
from plangate.records.policy import Decision
from plangate.records.signing import SigningKey
from plangate.world import owed
from plangate.world import receipts as stored
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.policies import Bundle

log = logging.getLogger(__name__)

KEEP_TRY_S = 4.0  # the receipt's one try before it is owed (as an outcome's)


@dataclass(frozen=True)
class Facts:
    """What the worker knows of a ledgered call once it concluded."""

    spec: ToolSpec[Any]
    call: ToolCall
    run_id: str  # the workflow Temporal says the call is of (the ledger row's)
    args_sha256: str
    approvers: tuple[str, ...]  # those whose proofs verified for this very call
    grant: GrantSeen | None  # the standing grant whose use admitted the call, verified again
    bundle: Bundle | None  # the Cedar bundle in force (None: no Cedar policies)
    configured: str | None  # else the bundle this worker is configured with, if any
    decision: Decision | None
    before: ProbeReport | None
    after: ProbeReport | None
    started_at: datetime | None
    finished_at: datetime | None


def approvers_of(call: ToolCall, approver_map: dict[str, bytes], verified: int) -> tuple[str, ...]:
    """The approvers whose proofs verified (``Proven.approvers`` counts them): the card's and
    its other proofs' signers the deployment lists; none where none verified."""
    grant = call.approval
    if grant is None or verified == 0:
        return ()
    names = {grant.proof.approver, *(p.approver for p, _ in grant.others)}
    return tuple(sorted(n for n in names if n in approver_map))


def _read(report: ProbeReport | None) -> dict[str, JsonValue] | None:
    if report is None:
        return None
    return {"read_at": report.read_at.isoformat(), "results": list(receipts.seen(
        (r.condition.probe, r.condition.args, r.outcome.value, r.observed)
        for r in report.results))}


def _policy(f: Facts) -> dict[str, JsonValue]:
    d = f.decision
    return {
        "bundle": f.bundle.bundle if f.bundle is not None else f.configured,
        "digest": f.bundle.digest if f.bundle is not None else None,
        "mode": f.bundle.mode if f.bundle is not None else None,
        "decision": None if d is None else {
            "outcome": d.outcome.value, "policies": list(d.policies),
            "approvers": d.approvers, "enforced": d.enforced,
            "decided_at": d.decided_at.isoformat(),
        },
    }


def _outcome(state: str, output: dict[str, JsonValue] | None, error: ToolError | None
             ) -> dict[str, JsonValue]:
    text = None if output is None else receipts.canonical(output)
    return {
        "state": state,
        "result_sha256": None if output is None else receipts.sha256_of(output),
        "result_size": None if text is None else len(text.encode()),
        "error": None if error is None else error.code,
    }


def _at(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def make(key: SigningKey, f: Facts, state: str, output: dict[str, JsonValue] | None,
         error: ToolError | None = None) -> dict[str, JsonValue]:
    """The signed receipt of the call's conclusion: ``state`` its ledger row's (done, failed,
    unknown), ``output`` what the tool returned (done), ``error`` why it did not."""
    call, spec = f.call, f.spec
    amount = moved(spec, call.step.args)
    return receipts.sign(key, {
        "receipt": receipts.DOMAIN,
        "effect": call.idempotency_key,
        "call": {
            "tool": spec.name, "effect": spec.effect.value, "args_sha256": f.args_sha256,
            "principal": call.on_behalf_of, "run_id": f.run_id, "step": call.step.n,
            "plan_version": call.step.plan_version, "idempotency_key": call.idempotency_key,
            "amount": None if amount is None else str(amount),
        },
        "approval": {
            "card_digest": call.approval.digest if call.approval is not None else None,
            "approvers": list(f.approvers),
            "grant": None if f.grant is None else {
                "id": f.grant.id, "approver": f.grant.approver, "uses": f.grant.uses,
                "used_before": f.grant.used,
            },
        },
        "policy": _policy(f),
        "before": _read(f.before),
        "after": _read(f.after),
        "outcome": _outcome(state, output, error),
        "times": {"started_at": _at(f.started_at), "finished_at": _at(f.finished_at),
                  "concluded_at": datetime.now(UTC).isoformat()},
    })


async def keep(world: World, f: Facts, receipt: dict[str, JsonValue], state: str,
               try_now: bool = True) -> None:
    """The receipt in ``plangate.receipts``: one try, then owed (``try_now`` False: owed at
    once, Postgres just failed the call's outcome); a row that will not go in is logged.
    Nothing here raises."""
    key = f.call.idempotency_key
    what = f"the receipt of {f.spec.name} {key}"

    async def write() -> None:
        await stored.write(world, key, f.run_id, state, receipt)

    if not try_now:
        owed.owed(world).owe(what, write)
        return
    try:
        await owed.written(world, what, write, KEEP_TRY_S)
    except Exception:  # not an outage: a row that will not go in; the call stands
        log.warning("%s was not written", what, exc_info=True)
