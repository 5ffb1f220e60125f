"""One Temporal activity per registered tool, named after the tool.

Before a tool acts, what the deployment decides centrally is checked again, now: the policy
bundle the run was decided under is still the one in force (``policy_superseded``, 412), and what
it reads and writes is within the deployment's scope (``out_of_scope``, 403). The authority the
run acts under is re-checked by the system the tool acts on (``world.pg.tool_transaction``).

Whatever a tool raises leaves here classified: a ``ToolError`` as it is; arguments that do not
fit the tool as ``bad_arguments`` (permanent, nothing was sent); anything else as ``internal``,
an outcome nobody can vouch for (the request may have left), with its cause, truncated.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import JsonValue, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from plangate.activities import effects, metrics, policing, workspace
from plangate.activities.catalogue import catalogue as catalogue_of
from plangate.activities.extensions import registry_for
from plangate.activities.probe_activity import ProbeActivities
from plangate.activities.tools.registry import CallContext, ToolSpec
from plangate.plans.guards import needs_approval
from plangate.plans.model import Condition
from plangate.plans.scope import Scope, refusals
from plangate.records.calls import (
    Outcome,
    ProbeReport,
    ProbeRequest,
    ToolCall,
    ToolFailure,
    ToolResult,
)
from plangate.records.policy import Decision
from plangate.records.proofs import distinct_approvers, grant_refusal, submission_refusal
from plangate.world import ledger
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.paths import PathOutsideWorkdir
from plangate.world.settings import CatalogueSettings, PolicySettings
from plangate.world.spans import span

log = logging.getLogger(__name__)
UNEXPECTED = "internal"  # what ``classify`` makes of anything not raised as a ToolError
HEARTBEAT_EVERY_S = 1.0
# Far below Temporal's 2 MB payload limit (and its 512 KiB warning): a larger result is
# replaced by its size, SHA-256 and a preview, and a binds path into it fails loudly.
MAX_RESULT_BYTES = 256 * 1024
RESULT_PREVIEW_BYTES = 16 * 1024
DETAIL_MAX = 500
# The read after a call never holds the call's answer back long: past this the workflow reads.
AFTER_READ_TIMEOUT_S = 5.0


def as_application_error(e: ToolError) -> ApplicationError:
    failure = ToolFailure(
        code=e.code,
        status=e.status,
        retryable=e.retryable,
        detail=e.detail,
        data=e.data,
        attempt=activity.info().attempt,
        may_have_acted=e.may_have_acted,
    )
    # The type is the code, so the message is the detail alone: Temporal prints "type:
    # message". Whether another attempt may help is the code's (records.codes.CODES), said on
    # the failure itself rather than listed in every call's RetryPolicy (22 codes, 0.4 KiB of
    # history a step). A failure a tool raised as designed is benign (no traceback); only the
    # unexpected (``internal``) keeps one.
    category = (ApplicationErrorCategory.UNSPECIFIED if e.code == UNEXPECTED
                else ApplicationErrorCategory.BENIGN)
    return ApplicationError(e.detail or e.code, failure.model_dump(mode="json"), type=e.code,
                            category=category, non_retryable=not e.retryable)


class RefusedAtCall(ToolError):
    """The check at the call did not hold: the tool was not called (``refuse_unless_held``)."""


def classify(e: BaseException, tool: str) -> ToolError:
    if isinstance(e, ToolError):
        return e
    if isinstance(e, ValidationError | PathOutsideWorkdir):
        return ToolError("bad_arguments", f"{tool}: {e}"[:DETAIL_MAX])
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return ToolError("no_space", f"{tool}: {e}"[:DETAIL_MAX])
    return ToolError(UNEXPECTED, f"{tool}: {type(e).__name__}: {e}"[:DETAIL_MAX])


def refuse_superseded_policy(call: ToolCall, current: str | None) -> None:
    """A run decided under one policy bundle (or under none), on a deployment that now enforces
    another, is refused before the tool acts (412: re-evaluate). A deployment with no bundle
    compares nothing."""
    decided = call.policy_bundle
    if current is not None and decided != current:
        raise ToolError(
            "policy_superseded",
            f"the run was decided under policy bundle {decided!r}; "
            f"this deployment now enforces {current!r}",
            {"policy_bundle": decided, "current": current},
        )


@dataclass(frozen=True)
class Proven:
    """What ``refuse_unproven`` verified of a call: its submitter (None where the deployment
    lists none, so nothing was verified) and how many distinct approvers' proofs hold for it
    (what a Cedar decision asking people is weighed against, never the grant's own count)."""

    submitter: str | None = None
    approvers: int = 0


def run_of_call() -> str:
    """The run this call acts for, as its submission and approvals were signed: its workflow's
    id, or a standalone activity's own id (a read without a run: ``activities.reading``)."""
    info = activity.info()
    return info.workflow_id or info.activity_id


def refuse_unproven(spec: ToolSpec[Any], call: ToolCall, policy: PolicySettings) -> Proven:
    """What protects the call, decided here, where it acts, from this worker's own policy and
    catalogue, whatever the workflow says: a deployment that lists submitters acts only for a
    run one of them signed, as a principal that submitter may use (403 ``not_permitted``); a
    call that waits for a person (the plan's word, passed on, or the tool's, the deployment's,
    or a re-planned money or external step) acts only on a card that is this very call, with
    an approval signed by an approver the deployment knows now (403 ``approval_missing``).
    A grant a call carries without needing one is verified too, and counts only if it holds."""
    workflow_id = run_of_call()
    submitter: str | None = None
    submitter_key: bytes | None = None
    if policy.submitters:
        why = submission_refusal(
            call.submission, policy.submitter_map, workflow_id=workflow_id, plan=None,
            on_behalf_of=call.on_behalf_of, started_at=None,
        )
        if why is not None:
            raise ToolError("not_permitted", f"{spec.name}: {why}")
        if call.submission is not None:
            submitter = call.submission.submitter
            submitter_key = policy.submitter_map[submitter].public
    need = call.approval_required or needs_approval(
        said=False, effect=spec.effect, approve_effects=policy.approve_effects,
        tool_says=spec.approval, replanned=call.step.plan_version > 1,
    )
    if not need and call.approval is None:
        return Proven(submitter)
    why = grant_refusal(
        call.approval, policy.approver_map, run_id=workflow_id, step=call.step.n,
        plan_version=call.step.plan_version, tool=spec.name, args=call.step.args,
        idempotency_key=call.idempotency_key, submitter=submitter, submitter_key=submitter_key,
    )
    if why is not None and need:
        raise ToolError("approval_missing", f"not called: {why}")
    return Proven(submitter, 0 if why is not None else distinct_approvers(
        call.approval, policy.approver_map))


def refuse_out_of_scope(spec: ToolSpec[Any], args: dict[str, JsonValue], scope: Scope) -> None:
    """What the call reads or writes, its arguments bound, is inside the deployment's scope;
    else nothing is read or written (``out_of_scope``, 403)."""
    why = next((w for _, w in refusals(scope, args, spec.reads, spec.writes, bound=True)), None)
    if why is not None:
        raise ToolError("out_of_scope", f"{spec.name}: {why}")


def bounded(output: dict[str, JsonValue]) -> dict[str, JsonValue]:
    data = json.dumps(output, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    if len(data) <= MAX_RESULT_BYTES:
        return output
    return {
        "result_cut": True,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "preview": data[:RESULT_PREVIEW_BYTES].decode(errors="ignore"),
    }


def reader_refs(spec: ToolSpec[Any], output: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """The fields of ``output`` the tool's reader takes (``output.NAME``)."""
    if spec.reader is None:
        return {}
    names = [src.split(".", 1)[1] for src in spec.reader.args.values() if src.startswith("output.")]
    return {n: output[n] for n in names if n in output}


async def _heartbeat() -> None:
    # Cancellation reaches a running activity only through heartbeats. The first one waits a
    # beat: a call shorter than that (most) sends the server none, an RPC a step saved.
    while True:
        await asyncio.sleep(HEARTBEAT_EVERY_S)
        activity.heartbeat()


def refuse_unless_held(checked: ProbeReport) -> None:
    """The check at the call: the tool acts only if every pre condition holds on this read."""
    if checked.all_hold:
        return
    first = next(r for r in checked.results if r.outcome is not Outcome.HOLDS)
    why = f"{first.condition.key()}: {first.detail or first.outcome.value}"
    code = "probe_unknown" if first.outcome is Outcome.UNKNOWN else "precondition_failed"
    raise RefusedAtCall(code, f"not called: at the call, {why}"[:DETAIL_MAX],
                        data=checked.model_dump(mode="json"))


async def _read(probes: ProbeActivities, call: ToolCall, conds: list[Condition],
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
        read = _read(probes, call, call.after, call.after_lenient, refs)
        return await asyncio.wait_for(read, timeout_s)
    except TimeoutError:  # a system slow or down: the workflow's read waits for it properly
        return None
    except Exception:  # the probes report what they cannot answer; this is anything else
        activity.logger.exception("the read after %s failed; the workflow reads again", spec.name)
        return None


def _make(
    spec: ToolSpec[Any], world: World, policy: PolicySettings, probes: ProbeActivities,
    book: policing.PolicyBook | None = None,
) -> Callable[[ToolCall], Any]:
    async def run_tool(call: ToolCall) -> ToolResult:
        return await perform(spec, world, policy, probes, book, call)

    run_tool.__name__ = run_tool.__qualname__ = "tool_" + spec.name.replace(".", "_")
    return activity.defn(name=spec.name)(run_tool)


async def perform(
    spec: ToolSpec[Any], world: World, policy: PolicySettings, probes: ProbeActivities,
    book: policing.PolicyBook | None, call: ToolCall,
) -> ToolResult:
    """One call of ``spec`` in its activity, every check at the call made first (the body of
    every tool's activity, and of a team's guarded activity: ``plangate.temporal``)."""
    recorded = effects.ledgered(spec)
    cedar_on = book is not None and book.on
    ctx = CallContext(
        call.step.run_id, call.step.n, call.idempotency_key,
        on_behalf_of=call.on_behalf_of, policy_bundle=call.policy_bundle,
        files=workspace.run_files(world, call.idempotency_key),
    )
    beat = asyncio.create_task(_heartbeat())
    checked = after = None
    opened = acting = False
    recorded_now = ""  # the outcome's row: "recorded", or "owed" (Postgres away: later)
    try:
        cedar = book.current() if book is not None and cedar_on else None
        if cedar is not None:
            policing.refuse_superseded(call, cedar)
        else:
            refuse_superseded_policy(call, policy.policy_bundle)
        if recorded:
            await effects.refuse_consumed(world, spec, call)
        proven = refuse_unproven(spec, call, policy)
        args = spec.args.model_validate(call.step.args)
        refuse_out_of_scope(spec, call.step.args, world.settings.scope)
        submitter, given = proven.submitter, proven.approvers
        totals = cedar is not None and recorded and policing.reads_totals(cedar)
        late = cedar is not None and (totals or policing.reads_observed(cedar))
        if cedar is not None and not late:  # decided now: the call then goes as ever
            await policing.judged(world, spec, call, cedar.decide(
                policing.request_at_call(spec, call, None, submitter, given)), given)
        if cedar is not None and late:
            # the policies read what the check at the call saw (or the totals, which the
            # intent's transaction holds still): the check first, a call it refuses is
            # decided no further
            if call.check:
                checked = await _read(probes, call, call.check, [], None)
                refuse_unless_held(checked)
            if not totals:
                await policing.judged(world, spec, call, cedar.decide(
                    policing.request_at_call(spec, call, checked, submitter, given)),
                    given)
            if recorded:
                run_id = activity.info().workflow_id or ""
                made: list[Decision] = []
                gate = policing.gate_for(spec, call, cedar, checked, submitter, given,
                                         made) if totals else None
                try:
                    answered = await effects.open_effect(world, probes, spec, call, run_id,
                                                         gate=gate)
                finally:  # kept once the ledger's lock is let go
                    for decided in made:
                        await policing.keep(world, spec, call, decided)
                opened = answered is None
                if answered is not None:
                    return await _from_ledger(probes, spec, call, answered)
        elif recorded:
            # the intent and the check at the call are independent: read while it commits
            run_id = activity.info().workflow_id or ""  # a tool runs only for a workflow
            opening = asyncio.ensure_future(
                effects.open_effect(world, probes, spec, call, run_id))
            try:
                if call.check:
                    checked = await _read(probes, call, call.check, [], None)
            finally:
                answered = await opening
                opened = answered is None
            if answered is not None:
                return await _from_ledger(probes, spec, call, answered)
        elif call.check:
            checked = await _read(probes, call, call.check, [], None)
        if checked is not None and not late:
            refuse_unless_held(checked)
        with span(world.tracer, f"step {call.step.n} {spec.name}", {
            "plangate.run_id": call.step.run_id, "plangate.step": call.step.n,
            "plangate.plan_version": call.step.plan_version, "plangate.tool": spec.name,
        }):
            token = ledger.in_effect(call.idempotency_key) if opened else None
            try:
                started, acting = datetime.now(UTC), True
                output = bounded(await spec.fn(args, world, ctx))
                finished = datetime.now(UTC)
            finally:
                if token is not None:
                    ledger.reset(token)
        if ctx.files.written:  # a file in the run's directory: a write, whatever the effect
            await effects.record_local_writes(world, spec, call, ctx.files)
        refs = reader_refs(spec, output)
        if opened:  # the outcome, written while the read after is made
            opened = False
            closing = effects.close_effect(world, spec, call.idempotency_key, output)
            after, kept = await asyncio.gather(read_after(probes, spec, call, refs), closing)
            recorded_now = "recorded" if kept else "owed"
        else:
            after = await read_after(probes, spec, call, refs)
    except asyncio.CancelledError:
        if opened and not acting:  # cancelled before it acted: certainly nothing done
            await asyncio.shield(effects.abandon(world, spec, call.idempotency_key,
                                                 "cancelled before the tool was called"))
        raise
    except Exception as e:
        error = classify(e, spec.name)
        if opened:
            await effects.close_effect(world, spec, call.idempotency_key, None, error)
        metrics.tool_call(spec.name, error.status)
        if error.code != UNEXPECTED:  # handled as designed: one line, the code once
            log.warning("%s step %d %s (attempt %d): %s", call.step.run_id, call.step.n,
                        spec.name, activity.info().attempt, error)
        raise as_application_error(error) from e
    finally:
        beat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beat
    metrics.tool_call(spec.name, 200)
    return ToolResult(
        output=output,
        started_at=started,
        finished_at=finished,
        attempt=activity.info().attempt,
        refs=refs,
        checked=checked,
        after=after,
        ledger=recorded_now,
    )


async def _from_ledger(
    probes: ProbeActivities, spec: ToolSpec[Any], call: ToolCall, answered: effects.Answered
) -> ToolResult:
    """A key the ledger has done: its answer, the tool not called. The read after is made as
    after any call (the post conditions judge the world, never the ledger)."""
    e = answered.entry
    refs = reader_refs(spec, answered.output)
    after = await read_after(probes, spec, call, refs)
    return ToolResult(
        output=answered.output, started_at=e.intent_at, finished_at=e.outcome_at or e.intent_at,
        attempt=activity.info().attempt, refs=refs, after=after, ledger="answered",
    )


def tool_activities(
    world: World, catalogue: CatalogueSettings, policy: PolicySettings,
    book: policing.PolicyBook | None = None,
) -> dict[str, Callable[[ToolCall], Any]]:
    """Every tool of the deployment's ``catalogue`` as an activity, by its name, acting on
    ``world`` under ``policy``."""
    probes = ProbeActivities(world, catalogue)
    tools = registry_for(catalogue).tools
    book = book or policing.PolicyBook(policy, world.settings.scope, catalogue_of(catalogue))
    return {name: _make(spec, world, policy, probes, book) for name, spec in tools.items()}
