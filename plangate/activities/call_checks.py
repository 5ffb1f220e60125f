"""The checks a guarded call makes where it acts, and how what it raises leaves
(``activities.guarded_call`` runs them in order).

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
import errno
import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from plangate.activities.tools.registry import ToolSpec
from plangate.plans.guards import needs_approval
from plangate.plans.scope import Scope, refusals
from plangate.records.calls import Outcome, ProbeReport, ToolCall, ToolFailure
from plangate.records.proofs import distinct_approvers, grant_refusal, submission_refusal
from plangate.world.errors import ToolError
from plangate.world.paths import PathOutsideWorkdir
from plangate.world.settings import PolicySettings

log = logging.getLogger(__name__)
UNEXPECTED = "internal"  # what ``classify`` makes of anything not raised as a ToolError
HEARTBEAT_EVERY_S = 1.0
# Far below Temporal's 2 MB payload limit (and its 512 KiB warning): a larger result is
# replaced by its size, SHA-256 and a preview, and a binds path into it fails loudly.
MAX_RESULT_BYTES = 256 * 1024
RESULT_PREVIEW_BYTES = 16 * 1024
DETAIL_MAX = 500


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


def refuse_unproven(spec: ToolSpec[Any], call: ToolCall, policy: PolicySettings,
                    granted: bool = False) -> Proven:
    """What protects the call, decided here, where it acts, from this worker's own policy and
    catalogue, whatever the workflow says: a deployment that lists submitters acts only for a
    run one of them signed, as a principal that submitter may use (403 ``not_permitted``); a
    call that waits for a person (the plan's word, passed on, or the tool's, the deployment's,
    or a re-planned money or external step) acts only on a card that is this very call, with
    an approval signed by an approver the deployment knows now (403 ``approval_missing``).
    A grant a call carries without needing one is verified too, and counts only if it holds.
    ``granted``: a standing grant's use reserved for this very call was consumed
    (``world.grants``): it stands for one approver's approval."""
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
    need = needs_person(spec, call, policy)
    if not need and call.approval is None:
        return Proven(submitter)
    if granted and call.approval is None:
        return Proven(submitter, 1)
    why = grant_refusal(
        call.approval, policy.approver_map, run_id=workflow_id, step=call.step.n,
        plan_version=call.step.plan_version, tool=spec.name, args=call.step.args,
        idempotency_key=call.idempotency_key, submitter=submitter, submitter_key=submitter_key,
    )
    if why is not None and need:
        raise ToolError("approval_missing", f"not called: {why}")
    return Proven(submitter, 0 if why is not None else distinct_approvers(
        call.approval, policy.approver_map))


def needs_person(spec: ToolSpec[Any], call: ToolCall, policy: PolicySettings) -> bool:
    """The call waits for a person: the workflow's word, or what this worker derives itself."""
    return call.approval_required or needs_approval(
        said=False, effect=spec.effect, approve_effects=policy.approve_effects,
        tool_says=spec.approval, replanned=call.step.plan_version > 1,
    )


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


async def heartbeat() -> None:
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
