"""The effect ledger at the call (``world.ledger``): what a tool's activity does before and after
a tool of effect ``write``, ``external`` or ``money`` acts.

Before: its intent is committed (``open_effect``). A key the ledger already has is resolved
here, whoever scheduled the call again (an activity retry, a ``temporal workflow reset``, a
worker of someone else's):

- ``done``: answered from the ledger; the tool is not called;
- an intent without an outcome (the worker died, the answer was lost): read back through the
  tool's reader by key where it has one (found: done, answered; certainly absent: the call goes
  ahead under the same key); a ``write`` without such a reader goes ahead, guarded as every
  write is by its check at the call and the version it carries; a ``money`` or ``external`` call
  without one is not called again (``outcome_unknown``: the step halts for a person).

After: its outcome (``close_effect``); a tool that acts in the deployment's Postgres has its row
marked done in its own transaction (``world.ledger.in_effect``).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from pydantic import JsonValue
from temporalio import activity

from plangate.activities.probe_activity import ProbeActivities
from plangate.activities.tools.registry import ToolSpec
from plangate.plans.amounts import moved
from plangate.plans.model import LEDGERED, Condition, Effect
from plangate.records import keys
from plangate.records.calls import Outcome, ProbeRequest, ToolCall
from plangate.world import ledger, owed
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.policies import resources_of
from plangate.world.runfiles import RunFiles

log = logging.getLogger(__name__)

SETTLE_TRY_S = 4.0  # an outcome's one try before it is owed (the pool waits 3 s itself)


def ledgered(spec: ToolSpec[Any]) -> bool:
    return spec.effect in LEDGERED


def args_sha256(args: dict[str, JsonValue]) -> str:
    data = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode()).hexdigest()




def intent_of(spec: ToolSpec[Any], call: ToolCall, run_id: str,
              granted_by: str | None = None) -> ledger.Intent:
    """The row a call's intent writes: the run Temporal says the call is of (``run_id``), and
    what the activity was handed and verified, never a plan's description of it.
    ``granted_by``: the approver of the standing grant whose use admitted it (its row in
    ``plangate.grant_uses`` holds the grant, under the same key)."""
    grant = call.approval
    return ledger.Intent(
        key=call.idempotency_key, run_id=run_id, step=call.step.n,
        plan_version=call.step.plan_version, tool=spec.name,
        args_sha256=args_sha256(call.step.args), effect=spec.effect.value,
        principal=call.on_behalf_of, amount=moved(spec, call.step.args),
        card_digest=grant.digest if grant is not None else None,
        approver=grant.proof.approver if grant is not None else granted_by,
        resource=resource_of(spec, call),
    )


def resource_of(spec: ToolSpec[Any], call: ToolCall) -> str:
    """What the call names first (``kind:name``: a bucket, a table, or the tool itself), the
    key the ledger's running totals are kept by resource under."""
    first = resources_of(spec.name, spec, call.step.args)[0]
    return f"{first.kind}:{first.name}"


async def refuse_consumed(world: World, spec: ToolSpec[Any], call: ToolCall) -> None:
    """A card pays once: one that the ledger shows consumed by another key is refused before
    anything else is judged of it (``approval_consumed``, 403)."""
    grant = call.approval
    if grant is None:
        return
    other = await ledger.consumed_by(world, grant.digest)
    if other is not None and other != call.idempotency_key:
        raise ledger.consumed(call.step.n, spec.name, other)


@dataclass(frozen=True)
class Answered:
    """The effect is done already: what it returned (or what its record reads), with its row."""

    output: dict[str, JsonValue]
    entry: ledger.Entry


def refuse_foreign_key(spec: ToolSpec[Any], call: ToolCall, run_id: str) -> None:
    """A run's keys begin with a digest of its whole workflow id (``records.keys``): a call
    whose key is another run's (a workflow of someone else's scheduling the tool, its id
    sharing any part of the victim's) is not called, so it can neither take another run's
    answer from the ledger nor take its key first."""
    if not keys.of_workflow(call.idempotency_key, run_id):
        raise ToolError(
            "bad_arguments",
            f"{spec.name}: not called: the idempotency key {call.idempotency_key!r} is not a "
            f"key of run {run_id}",
        )


async def open_effect(
    world: World, probes: ProbeActivities, spec: ToolSpec[Any], call: ToolCall, run_id: str,
    gate: ledger.Gate | None = None, granted_by: str | None = None,
) -> Answered | None:
    """None: the intent is recorded and the tool may act. ``Answered``: it must not.
    ``run_id``: the workflow Temporal says the call is of. ``gate``: a new call is admitted
    by it first, against the principal's running totals (``ledger.begin``)."""
    refuse_foreign_key(spec, call, run_id)
    begun = await ledger.begin(world, intent_of(spec, call, run_id, granted_by), gate)
    if begun.fresh or begun.entry is None:
        return None
    entry = begun.entry
    if entry.state is ledger.State.DONE:
        if entry.output is not None:
            return Answered(entry.output, entry)
        # done with the effect's own commit, its answer lost: the record, where it can be read
        found = await _read_back(probes, spec, call) if _reads_by_key(spec) else None
        return Answered(found if isinstance(found, dict) else {}, entry)
    return await _unresolved(world, probes, spec, call, entry)


def _reads_by_key(spec: ToolSpec[Any]) -> bool:
    return spec.reader is not None and spec.reader.by_key


async def _unresolved(
    world: World, probes: ProbeActivities, spec: ToolSpec[Any], call: ToolCall,
    entry: ledger.Entry,
) -> Answered | None:
    key = call.idempotency_key
    if _reads_by_key(spec):
        found = await _read_back(probes, spec, call)
        if found is not None:
            output = found if isinstance(found, dict) else {}
            await ledger.settle(world, key, ledger.State.DONE, output, "read back by key")
            return Answered(output, entry)
        await ledger.again(world, key)
        return None
    if spec.effect is Effect.WRITE:
        # a write goes again only through its check at the call and the version it carries
        await ledger.again(world, key)
        return None
    raise ToolError(
        "outcome_unknown",
        f"{spec.name}: not called again: the effect ledger holds its intent under {key} "
        f"({entry.state.value} since {entry.intent_at.isoformat()}, attempt "
        f"{entry.attempts}) with no outcome, and {spec.name} has no reader by key to tell "
        "whether it acted",
    )


async def _read_back(
    probes: ProbeActivities, spec: ToolSpec[Any], call: ToolCall
) -> JsonValue | None:
    """The record the call makes, read by its key: the record (found), None (certainly
    absent). A reader that cannot answer: the tool does not act now (the step tries again)."""
    req = ProbeRequest(step=call.step, conditions=[Condition(probe="effect_recorded")],
                       idempotency_key=call.idempotency_key)
    result = (await probes.read(req)).results[0]
    if result.outcome is Outcome.HOLDS:
        return result.observed if result.observed is not None else {}
    if result.outcome is Outcome.VIOLATED:
        return None
    raise ToolError(
        "system_unavailable",
        f"{spec.name}: not called: an earlier call under {call.idempotency_key} has no outcome "
        f"in the effect ledger and its record could not be read: {result.detail}"[:500],
    )


async def abandon(world: World, spec: ToolSpec[Any], key: str, why: str) -> None:
    """An intent whose tool was never called (the activity was cancelled first): ``failed``."""
    await _settle(world, spec, key, ledger.State.FAILED, None, why)


async def close_effect(
    world: World, spec: ToolSpec[Any], key: str, output: dict[str, JsonValue] | None,
    error: ToolError | None = None,
) -> bool:
    """The outcome, once the tool returned or raised. The tool may have acted: nothing here
    fails the call; a row left ``intent`` is read back or halted the next time its key comes.
    False: the outcome is owed, not written yet."""
    detail = "" if error is None else error.detail
    return await _settle(world, spec, key, outcome_state(error), output, detail)


def outcome_state(error: ToolError | None) -> ledger.State:
    """The ledger's state of a call that returned (None) or raised ``error``."""
    if error is None:
        return ledger.State.DONE
    return ledger.State.UNKNOWN if error.may_have_acted else ledger.State.FAILED


async def _settle(
    world: World, spec: ToolSpec[Any], key: str, state: ledger.State,
    output: dict[str, JsonValue] | None, detail: str,
) -> bool:
    """False: Postgres did not take it now; it is owed (``world.owed``), and until it is
    written the row reads ``intent`` (read back the next time its key comes)."""

    async def write() -> None:
        await ledger.settle(world, key, state, output, detail)

    try:
        return await owed.written(world, f"the outcome of {spec.name} {key}", write, SETTLE_TRY_S)
    except psycopg.Error:  # not an outage: a row that will not go in
        activity.logger.warning(
            "the effect ledger did not take the outcome of %s (%s): left as intent",
            spec.name, key, exc_info=True,
        )
        return False


async def record_local_writes(world: World, spec: ToolSpec[Any], call: ToolCall,
                              files: RunFiles) -> None:
    """Each file the call wrote in its run's directory, a ``local_write`` row (done) under the
    run Temporal says the call is of: what a read such as ``s3.get`` wrote here is ledgered as
    a write, though its effect towards the system it reads stays ``read``. Bookkeeping: a row
    that cannot be written is logged, and the call stands (the file is in the run's own
    directory whatever the ledger says)."""
    info = activity.info()
    run = info.workflow_id or info.activity_id
    for path, written in files.written:
        at = hashlib.sha256(f"{files.scope}/{path}".encode("utf-8", "surrogatepass"))
        row = ledger.Intent(
            key=keys.local_write_key(call.idempotency_key, at.hexdigest()[:24]), run_id=run,
            step=call.step.n, plan_version=call.step.plan_version, tool=spec.name,
            args_sha256=args_sha256(call.step.args), effect=ledger.LOCAL_WRITE,
            principal=call.on_behalf_of, resource=f"file:{files.scope}/{path}",
        )
        try:
            await ledger.local_write(world, row, {"path": path, "size": written.size,
                                                  "sha256": written.sha256,
                                                  "stored": written.where})
        except Exception:  # the record's, not the call's: a Postgres blink fails no read
            log.warning("the local write %s of %s was not recorded", path, call.idempotency_key,
                        exc_info=True)
