"""Errors a tool raises, and the one place where retry classification is decided.

    Exception
    └── ToolError                 a tool call failed; carries code, status, retryable
        (code -> status/retryable comes from CODES; a code not listed there is a bug)

Temporal sees a ToolError as an ``ApplicationError`` whose ``type`` is the code, so the
activity's RetryPolicy can name permanent codes in ``non_retryable_error_types``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pydantic import JsonValue
from temporalio.common import RetryPolicy


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
    "authority_revoked": Code(403, False, "the authority the step acts under was revoked"),
    "out_of_scope": Code(403, False, "the target is outside what tools of this deployment write"),
    "too_few_rows": Code(422, False, "the load would commit fewer rows than required"),
    # 400, as the billing system answers voiding an already-void invoice (seed 001)
    "invalid_state": Code(400, False, "the target is not in a state the tool can act on"),
    "idempotency_conflict": Code(
        422, False, "the idempotency key was already used for a call with other arguments"
    ),
    # transient: another attempt may succeed
    "unavailable": Code(503, True, "the system did not answer", may_have_acted=True),
    "throttled": Code(429, True, "the system asked us to slow down"),
    "probe_unknown": Code(503, True, "a probe could not answer"),
    # an exception the tool did not classify: a bug, or a failure after the request left
    "internal": Code(500, False, "the tool raised an unexpected error", may_have_acted=True),
}

PERMANENT_CODES: tuple[str, ...] = tuple(c for c, v in CODES.items() if not v.retryable)


class ToolError(Exception):
    def __init__(self, code: str, detail: str = "", data: JsonValue = None) -> None:
        if code not in CODES:
            raise ValueError(f"unknown tool error code {code!r}; add it to activities.errors.CODES")
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.status = CODES[code].status
        self.retryable = CODES[code].retryable
        self.may_have_acted = CODES[code].may_have_acted
        self.detail = detail
        self.data = data


def with_non_retryable_errors(policy: RetryPolicy, codes: tuple[str, ...]) -> RetryPolicy:
    """A copy of ``policy`` that never retries ``codes`` (the policy passed in is not changed)."""
    merged = tuple(dict.fromkeys((*(policy.non_retryable_error_types or ()), *codes)))
    return replace(policy, non_retryable_error_types=list(merged))
