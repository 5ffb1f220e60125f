"""One guarded call where it acts: the body of every tool's activity (a plan's step, a read
without a run) and of a team's guarded activity (``plangate.temporal.at_call``).

Stages, each returning what it found, run in order by ``run_guarded``:

1. ``prove``: the caller (the bundle in force, a card not consumed, its submission and
   approval, its arguments, its scope), before anything else is read or written: ``Proof``;
2. ``check_first``: where the policies read what the check at the call observes (or the
   running totals), the check is read and held first: a call it refuses is decided no further;
3. ``decide``: the policies, now (``Ruling.decision``), or under the ledger's lock against the
   principal's totals (``Ruling.gate``);
4. ``enter_ledger``: the intent (a key the ledger has done: its answer, the tool not called);
   the check at the call read alongside it where not read first: ``Entered``;
5. ``hold``: the check at the call holds, the instant before the act;
6. ``act``: the tool: ``Acted``;
7. ``conclude``: the outcome's row and the read after, then the effect's signed receipt
   (``receipting``): the ``ToolResult``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout
from pydantic import BaseModel, JsonValue
from temporalio import activity

from plangate.activities import effects, metrics, policing, receipting, workspace
from plangate.activities.call_checks import (
    UNEXPECTED,
    Proven,
    as_application_error,
    bounded,
    classify,
    heartbeat,
    needs_person,
    reader_refs,
    refuse_out_of_scope,
    refuse_superseded_policy,
    refuse_unless_held,
    refuse_unproven,
)
from plangate.activities.probe_activity import ProbeActivities
from plangate.activities.tools.registry import CallContext, ToolSpec
from plangate.plans.model import Condition
from plangate.records.calls import ProbeReport, ProbeRequest, ToolCall, ToolResult
from plangate.records.grants import GrantSeen
from plangate.records.policy import Decision
from plangate.world import grants, ledger
from plangate.world import receipts as stored_receipts
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.policies import Bundle
from plangate.world.settings import PolicySettings
from plangate.world.spans import span

log = logging.getLogger(__name__)
_PG_DOWN = (PoolTimeout, psycopg.OperationalError)
# The read after a call never holds the call's answer back long: past this the workflow reads.
AFTER_READ_TIMEOUT_S = 5.0


class Timing(Enum):
    """When the deployment's policies decide a call (``policing``)."""

    NONE = "none"  # no Cedar policies: the settings decided
    NOW = "now"  # before the ledger and the check
    OBSERVED = "observed"  # once the check at the call is read (its ``context.observed``)
    TOTALS = "totals"  # against the running totals, under the ledger's lock

    @property
    def late(self) -> bool:
        return self in (Timing.OBSERVED, Timing.TOTALS)


@dataclass(frozen=True)
class Setting:
    """The tool and what its call is judged against on this worker."""

    spec: ToolSpec[Any]
    world: World
    policy: PolicySettings
    probes: ProbeActivities
    book: policing.PolicyBook | None

    @property
    def recorded(self) -> bool:
        return effects.ledgered(self.spec)


@dataclass(frozen=True)
class Proof:
    """The caller proven: the bundle in force (None: no Cedar policies), what its proofs
    verified, its arguments as the tool takes them, and when the policies decide."""

    bundle: Bundle | None
    proven: Proven
    args: BaseModel
    timing: Timing
    grant: GrantSeen | None = None  # the standing grant whose use admitted the call


class TotalsGate:
    """The ledger's gate (``ledger.begin``): the decision against the principal's totals,
    under its lock. What it decided (``decided``) is kept once the lock is let go (keeping it
    takes a connection of its own)."""

    def __init__(self, s: Setting, call: ToolCall, bundle: Bundle, proof: Proof,
                 checked: ProbeReport | None) -> None:
        self.s, self.call, self.bundle, self.proof, self.checked = s, call, bundle, proof, checked
        self.decided: Decision | None = None

    async def __call__(self, totals: ledger.LedgerTotals) -> None:
        given = self.proof.proven.approvers
        self.decided = self.bundle.decide(policing.request_at_call(
            self.s.spec, self.call, self.checked, self.proof.proven.submitter, given, totals,
            grant=self.proof.grant))
        policing.enforce(self.s.spec, self.call, self.decided, given)


@dataclass(frozen=True)
class Ruling:
    """The policies' word: made now (``decision``), or to be made under the ledger's lock
    (``gate``); neither without Cedar policies."""

    decision: Decision | None = None
    gate: TotalsGate | None = None


@dataclass(frozen=True)
class Entered:
    """The ledger's answer: ``opened``, this call's intent is recorded (its outcome is owed);
    ``answered``, the key is done and this is its answer (the tool is not called). And the
    check at the call as read; ``failed``: what broke reading it alongside the intent."""

    opened: bool = False
    answered: effects.Answered | None = None
    checked: ProbeReport | None = None
    failed: BaseException | None = None


@dataclass(frozen=True)
class Acted:
    """What the tool returned (bounded), when, and the run files it wrote."""

    output: dict[str, JsonValue]
    started: datetime
    finished: datetime
    ctx: CallContext = field(repr=False)


async def prove(s: Setting, call: ToolCall) -> Proof:
    """Refuses a call decided under another bundle than the one in force (412), a card
    consumed by another key, an unproven submitter or approval, arguments that do not fit the
    tool, anything out of the deployment's scope."""
    bundle = s.book.current() if s.book is not None and s.book.on else None
    if bundle is not None:
        policing.refuse_superseded(call, bundle)
    else:
        refuse_superseded_policy(call, s.policy.policy_bundle)
    if s.recorded:
        await effects.refuse_consumed(s.world, s.spec, call)
    grant = await granted(s, call)
    proven = refuse_unproven(s.spec, call, s.policy, granted=grant is not None)
    args = s.spec.args.model_validate(call.step.args)
    refuse_out_of_scope(s.spec, call.step.args, s.world.settings.scope)
    return Proof(bundle, proven, args, _timing(bundle, s.recorded), grant)


async def granted(s: Setting, call: ToolCall) -> GrantSeen | None:
    """The use of a standing grant reserved for this very call (its key, in the run Temporal
    says it is of, with these arguments), consumed now: the grant verified again, live and
    unrevoked (``grant_revoked``, 403, where it no longer holds). None: no use was reserved for
    it (a card is the call's proof, or nothing is). Asked only of a call that needs a person
    and carries no card: no other call pays a read of the grants."""
    workflow_id = activity.info().workflow_id
    if call.approval is not None or workflow_id is None or not needs_person(
            s.spec, call, s.policy):
        return None
    # the run's submitter as the submission names it (verified next, by ``refuse_unproven``)
    sub = call.submission
    submitter = s.policy.submitter_map.get(sub.submitter) if s.policy.submitters and sub else None
    c = grants.Call(workflow_id, call.idempotency_key, s.spec.name, call.on_behalf_of,
                    call.step.args, effects.args_sha256(call.step.args), s.spec,
                    submitter.name if submitter is not None else None,
                    submitter.public if submitter is not None else None)
    try:
        return await grants.consume(s.world, c, s.policy.approver_map)
    except _PG_DOWN as e:  # nothing was sent: waited for, as the ledger's outage is
        raise ToolError("system_unavailable", f"the standing grants: {e}"[:500]) from e


def _timing(bundle: Bundle | None, recorded: bool) -> Timing:
    if bundle is None:
        return Timing.NONE
    if recorded and policing.reads_totals(bundle):
        return Timing.TOTALS
    return Timing.OBSERVED if policing.reads_observed(bundle) else Timing.NOW


async def check_first(s: Setting, call: ToolCall, proof: Proof) -> ProbeReport | None:
    """The check at the call, read and held before the policies that read it (late timings);
    else None: it is read alongside the intent (``enter_ledger``)."""
    if not proof.timing.late or not call.check:
        return None
    checked = await read(s.probes, call, call.check, [], None)
    refuse_unless_held(checked)
    return checked


async def decide(s: Setting, call: ToolCall, proof: Proof,
                 checked: ProbeReport | None) -> Ruling:
    """The policies' decision, kept where it is counted and enforced; against the totals,
    the gate that makes it under the ledger's lock. Decided now, the guards' decision of the
    very same request on this worker is taken (``Bundle.recall``: never where the policies
    read the time, the check or the totals), else Cedar decides."""
    bundle = proof.bundle
    if bundle is None:
        return Ruling()
    if proof.timing is Timing.TOTALS:
        return Ruling(gate=TotalsGate(s, call, bundle, proof, checked))
    given = proof.proven.approvers
    request = policing.request_at_call(s.spec, call, checked, proof.proven.submitter, given,
                                       grant=proof.grant)
    recalled = bundle.recall(request) if proof.timing is Timing.NOW else None
    decided = recalled or bundle.decide(request)
    await policing.judged(s.world, s.spec, call, decided, given)
    return Ruling(decision=decided)


async def enter_ledger(s: Setting, call: ToolCall, proof: Proof, ruling: Ruling,
                       checked: ProbeReport | None) -> Entered:
    """The intent of a ledgered call (``effects.open_effect``). Where the check at the call
    was not read first, it is read here, while the intent commits (the two are independent)."""
    gate = ruling.gate
    opening = asyncio.ensure_future(effects.open_effect(
        s.world, s.probes, s.spec, call, activity.info().workflow_id or "", gate=gate,
        granted_by=proof.grant.approver if proof.grant is not None else None,
    )) if s.recorded else None  # a ledgered tool runs only for a workflow
    failed: BaseException | None = None
    try:
        if not proof.timing.late and call.check:
            checked = await read(s.probes, call, call.check, [], None)
    except BaseException as e:  # the intent's own answer first: an opened one is settled
        failed = e
    finally:
        try:
            answered = await opening if opening is not None else None
        finally:
            if gate is not None and gate.decided is not None:  # kept once the lock is let go
                await policing.keep(s.world, s.spec, call, gate.decided)
    return Entered(opening is not None and answered is None, answered, checked, failed)


def hold(proof: Proof, entered: Entered) -> None:
    """The check at the call, judged the instant before the act (where not judged first)."""
    if entered.failed is not None:
        raise entered.failed
    if entered.checked is not None and not proof.timing.late:
        refuse_unless_held(entered.checked)


async def act(s: Setting, call: ToolCall, proof: Proof, entered: Entered) -> Acted:
    """The tool, in the span of its step; a tool acting in the deployment's Postgres marks its
    intent done in its own transaction (``ledger.in_effect``)."""
    ctx = CallContext(
        call.step.run_id, call.step.n, call.idempotency_key,
        on_behalf_of=call.on_behalf_of, policy_bundle=call.policy_bundle,
        files=workspace.run_files(s.world, call.idempotency_key),
    )
    with span(s.world.tracer, f"step {call.step.n} {s.spec.name}", {
        "plangate.run_id": call.step.run_id, "plangate.step": call.step.n,
        "plangate.plan_version": call.step.plan_version, "plangate.tool": s.spec.name,
    }):
        token = ledger.in_effect(call.idempotency_key) if entered.opened else None
        try:
            started = datetime.now(UTC)
            output = bounded(await s.spec.fn(proof.args, s.world, ctx))
            return Acted(output, started, datetime.now(UTC), ctx)
        finally:
            if token is not None:
                ledger.reset(token)


async def conclude(s: Setting, call: ToolCall, proof: Proof, ruling: Ruling, entered: Entered,
                   acted: Acted) -> ToolResult:
    """The run files written, the outcome's row (written while the read after is made), then
    the effect's receipt (it holds the read after)."""
    if acted.ctx.files.written:  # a file in the run's directory: a write, whatever the effect
        await effects.record_local_writes(s.world, s.spec, call, acted.ctx.files)
    refs = reader_refs(s.spec, acted.output)
    word = ""  # the outcome's row: "recorded", or "owed" (Postgres away: later)
    receipt = None
    if entered.opened:
        closing = effects.close_effect(s.world, s.spec, call.idempotency_key, acted.output)
        after, kept = await asyncio.gather(read_after(s.probes, s.spec, call, refs), closing)
        word = "recorded" if kept else "owed"
        receipt = await receipted(s, facts(s, call, proof, ruling, entered, acted, after),
                                  acted.output, try_now=kept)
    else:
        after = await read_after(s.probes, s.spec, call, refs)
    return ToolResult(
        output=acted.output, started_at=acted.started, finished_at=acted.finished,
        attempt=activity.info().attempt, refs=refs, checked=entered.checked, after=after,
        ledger=word, receipt=receipt,
    )


def facts(s: Setting, call: ToolCall, proof: Proof, ruling: Ruling, entered: Entered,
          acted: Acted | None, after: ProbeReport | None) -> receipting.Facts:
    """What the worker verified, decided, read and got back of a ledgered call."""
    gate = ruling.gate
    return receipting.Facts(
        spec=s.spec, call=call, run_id=activity.info().workflow_id or "",
        args_sha256=effects.args_sha256(call.step.args),
        approvers=receipting.approvers_of(call, s.policy.approver_map, proof.proven.approvers),
        bundle=proof.bundle, configured=s.policy.policy_bundle, grant=proof.grant,
        decision=ruling.decision or (gate.decided if gate else None),
        before=entered.checked, after=after,
        started_at=acted.started if acted else None, finished_at=acted.finished if acted else None,
    )


async def receipted(s: Setting, f: receipting.Facts, output: dict[str, JsonValue] | None,
                    error: ToolError | None = None, *, try_now: bool = True
                    ) -> dict[str, JsonValue] | None:
    """The call's receipt, signed and kept (bookkeeping: never fails the call; ``try_now``
    False: owed at once, the outcome's row just was); None where this worker has no receipt
    key."""
    key = s.policy.receipt_key
    if key is None:
        return None
    state = effects.outcome_state(error).value
    receipt = receipting.make(key, f, state, output, error)
    await receipting.keep(s.world, f, receipt, state, try_now)
    return receipt


async def answered(s: Setting, call: ToolCall, found: effects.Answered) -> ToolResult:
    """A key the ledger has done: its answer, the tool not called. The read after is made as
    after any call (the post conditions judge the world, never the ledger); the effect's
    receipt is the one made when it was done (none is made again)."""
    e = found.entry
    refs = reader_refs(s.spec, found.output)
    after, receipt = await asyncio.gather(read_after(s.probes, s.spec, call, refs),
                                          receipt_of(s, call.idempotency_key))
    return ToolResult(
        output=found.output, started_at=e.intent_at, finished_at=e.outcome_at or e.intent_at,
        attempt=activity.info().attempt, refs=refs, after=after, ledger="answered",
        receipt=receipt,
    )


async def receipt_of(s: Setting, key: str) -> dict[str, JsonValue] | None:
    """The receipt kept for ``key``, if this worker signs receipts and one was written."""
    if s.policy.receipt_key is None:
        return None
    try:
        text = await stored_receipts.of_key(s.world, key)
    except Exception:  # bookkeeping: an answer never waits on nor fails for its receipt
        log.warning("the receipt of %s could not be read", key, exc_info=True)
        return None
    return None if text is None else dict(json.loads(text))


async def read(probes: ProbeActivities, call: ToolCall, conds: list[Condition],
               lenient: list[str], refs: dict[str, JsonValue] | None) -> ProbeReport:
    req = ProbeRequest(step=call.step, conditions=conds, idempotency_key=call.idempotency_key,
                       output=refs, lenient=lenient)
    return await probes.read(req)


async def read_after(
    probes: ProbeActivities,
    spec: ToolSpec[Any],
    call: ToolCall,
    refs: dict[str, JsonValue],
    timeout_s: float = AFTER_READ_TIMEOUT_S,
) -> ProbeReport | None:
    """``call.after``, once the tool has acted: nothing this read meets may fail the call (a
    retry would act again), so a read that breaks is no read, and the workflow reads itself.
    ``refs``: the fields of the tool's result its reader needs (field probes)."""
    if not call.after:
        return None
    try:
        reading = read(probes, call, call.after, call.after_lenient, refs)
        return await asyncio.wait_for(reading, timeout_s)
    except TimeoutError:  # a system slow or down: the workflow's read waits for it properly
        return None
    except Exception:  # the probes report what they cannot answer; this is anything else
        activity.logger.exception("the read after %s failed; the workflow reads again", spec.name)
        return None


async def stopped(beat: asyncio.Task[None]) -> None:
    beat.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await beat


async def run_guarded(
    spec: ToolSpec[Any], world: World, policy: PolicySettings, probes: ProbeActivities,
    book: policing.PolicyBook | None, call: ToolCall, *, beats_while_acting: bool = True,
) -> ToolResult:
    """One call of ``spec`` in its activity, every check at the call made first. What it
    raises leaves as an ``ApplicationError`` of its code (``call_checks``).
    ``beats_while_acting=False``: the tool is a team's sync activity, whose context heartbeats
    by waiting on this event loop (the SDK's); the guard's beat stops before it acts, and the
    function's own heartbeats are the call's from then on."""
    s = Setting(spec, world, policy, probes, book)
    beat = asyncio.create_task(heartbeat())
    proof: Proof | None = None
    ruling: Ruling | None = None
    entered: Entered | None = None
    acting = concluding = False
    try:
        proof = await prove(s, call)
        checked = await check_first(s, call, proof)
        ruling = await decide(s, call, proof, checked)
        entered = await enter_ledger(s, call, proof, ruling, checked)
        if entered.answered is not None and entered.failed is None:
            return await answered(s, call, entered.answered)
        hold(proof, entered)
        acting = True
        if not beats_while_acting:
            await stopped(beat)
        acted = await act(s, call, proof, entered)
        concluding = True
        result = await conclude(s, call, proof, ruling, entered, acted)
    except asyncio.CancelledError:
        if entered is not None and entered.opened and not acting:  # certainly nothing done
            await asyncio.shield(effects.abandon(world, spec, call.idempotency_key,
                                                 "cancelled before the tool was called"))
        raise
    except Exception as e:
        error = classify(e, spec.name)
        if entered is not None and entered.opened and not concluding:
            kept = await effects.close_effect(world, spec, call.idempotency_key, None, error)
            if proof is not None and ruling is not None:
                await receipted(s, facts(s, call, proof, ruling, entered, None, None), None,
                                error, try_now=kept)
        metrics.tool_call(spec.name, error.status)
        if error.code != UNEXPECTED:  # handled as designed: one line, the code once
            log.warning("%s step %d %s (attempt %d): %s", call.step.run_id, call.step.n,
                        spec.name, activity.info().attempt, error)
        raise as_application_error(error) from e
    finally:
        await stopped(beat)
    metrics.tool_call(spec.name, 200)
    return result
