"""Failure codes: the one table where what each code means, its HTTP-like status and whether
repetition can change it (retryable) are decided. Tools raise them (``world.errors.ToolError``),
the workflow's retry policies name the permanent ones, the run report carries them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    status: int
    retryable: bool
    meaning: str
    # The system may have acted before the error reached us: the call's outcome is unknown.
    may_have_acted: bool = False


CODES: dict[str, Code] = {
    # permanent: repetition cannot change the answer
    "bad_arguments": Code(400, False, "arguments do not fit the tool"),
    "unbound_reference": Code(400, False, "a ${name} no completed step bound"),
    "binding_missing": Code(400, False, "a binds path found nothing in the step's result"),
    "not_found": Code(404, False, "the object or record does not exist"),
    "record_archived": Code(409, False, "the record is archived and cannot be changed"),
    "resource_moved": Code(409, False, "the version the write assumed is no longer current"),
    "precondition_failed": Code(412, False, "a precondition of the write no longer holds"),
    # refused before the tool acts: the run was decided under another policy bundle than the
    # one the deployment now enforces (PLANGATE_POLICY_BUNDLE); nothing was sent
    "policy_superseded": Code(
        412, False, "the policy bundle the run was decided under is no longer in force"
    ),
    "authority_revoked": Code(403, False, "the authority the step acts under was revoked"),
    "out_of_scope": Code(403, False, "the target is outside what tools of this deployment write"),
    # the run's submitter is not proven, or may not act for the principal the run names
    "not_permitted": Code(403, False, "the submitter may not run this plan as this principal"),
    # refused by the tool's activity before it acts: the call needs a person's approval and
    # carries no valid proof of one
    "approval_missing": Code(403, False, "the call needs an approver's proven approval"),
    # the approval the call carries was consumed by another effect (the effect ledger): an
    # approval pays once
    "approval_consumed": Code(403, False, "the approval was consumed by another effect"),
    # the standing grant whose use was reserved for the call was revoked or expired before it,
    # or no longer covers it (``world.grants``): nothing was sent; the step halts
    "grant_revoked": Code(403, False, "the standing grant that covered the call no longer holds"),
    # a team's activity marked to run only under plangate's guard (``plangate.temporal.guarded``)
    # and no guard admitted the call: a worker without PlangatePlugin registers it
    "guard_missing": Code(403, False, "the activity runs only for a call plangate's guard "
                          "admitted, and none admitted this one"),
    # the effect ledger holds an intent under this key with no outcome, and the tool has no
    # reader by key to tell whether it acted: not called again, a person decides
    "outcome_unknown": Code(
        500, False, "an earlier call under this key may have acted", may_have_acted=True
    ),
    # the deployment's policy forbids the call (a Cedar forbid, or no permit; or a limit on
    # running totals): refused before the tool acts, nothing was sent
    "policy_denied": Code(403, False, "the deployment's policy forbids this call"),
    # the plan a run was started with does not pass the deployment's own check
    "bad_plan": Code(400, False, "the plan does not pass this deployment's check"),
    # the worker's disk (its work directory) is full: the write failed part way and left
    # nothing under the file's name; another attempt meets the same disk
    "no_space": Code(507, False, "the worker's disk is full"),
    "too_few_rows": Code(422, False, "the load would commit fewer rows than required"),
    # 400, as the billing system answers voiding an already-void invoice (seed 001)
    "invalid_state": Code(400, False, "the target is not in a state the tool can act on"),
    "idempotency_conflict": Code(
        422, False, "the idempotency key was already used for a call with other arguments"
    ),
    # an MCP server's tool answered its call with an error (``isError``), or the server refused
    # the call (an unknown tool, arguments it does not take): the server's message says why
    "tool_error": Code(422, False, "the MCP server reported the tool call failed"),
    # transient: another attempt may succeed
    "unavailable": Code(503, True, "the system did not answer", may_have_acted=True),
    "throttled": Code(429, True, "the system asked us to slow down"),
    "probe_unknown": Code(503, True, "a probe could not answer"),
    "system_unavailable": Code(503, True, "the system a probe reads did not answer"),
    # an exception the tool did not classify: a bug, or a failure after the request left
    "internal": Code(500, False, "the tool raised an unexpected error", may_have_acted=True),
}

PERMANENT_CODES: tuple[str, ...] = tuple(c for c, v in CODES.items() if not v.retryable)
