"""What a team's workflow sees when plangate's guard stops a call.

    temporalio.exceptions.ApplicationError
    └── GuardRefused        a check of the guard did not hold: the activity was not called, or
        │                   its post condition failed on a fresh read. Its ``type`` is
        │                   plangate's code (``precondition_unmet``, ``postcondition_unmet``,
        │                   ``approval_rejected``, and at the call ``precondition_failed``,
        │                   ``approval_missing``, ``policy_denied``...), non-retryable, its
        │                   message naming the condition and what was seen. Refused at the
        │                   call, its cause is the activity's own ``ActivityError``, as the SDK
        │                   made it.
        └── GuardHalted     the same where the table says ``halt``, or a money call's outcome
                            is unknown: the workflow fails with it whatever the team's code
                            catches.

A workflow handles a refusal as any ``ApplicationError`` (``except GuardRefused``; uncaught, it
fails the workflow with plangate's code as the failure's type); ``str(error)`` is the reason,
for an agent's model to read (``tool_error_text``).
"""

from __future__ import annotations

from temporalio.exceptions import ActivityError, ApplicationError


class GuardRefused(ApplicationError):
    verb = "refused"

    def __init__(self, activity: str, code: str, detail: str, status: int | None) -> None:
        said = f"{code} ({status})" if status is not None else code
        super().__init__(
            f"plangate {self.verb} {activity}: {said}: {detail}",
            {"activity": activity, "code": code, "status": status, "detail": detail},
            type=code, non_retryable=True,
        )
        self.activity, self.code, self.detail, self.status = activity, code, detail, status

    def __str__(self) -> str:  # the message names the code already (the SDK's str prefixes it)
        return self.message


class GuardHalted(GuardRefused):
    verb = "halted"


def tool_error_text(error: BaseException) -> str:
    """What an agent's model reads of a failed tool call: plangate's reason for a guard's
    refusal, the activity's own failure message otherwise (``ActivityError`` alone says only
    "Activity task failed")."""
    if isinstance(error, GuardRefused):
        return str(error)
    cause = error.__cause__ if isinstance(error, ActivityError) else None
    if isinstance(cause, ApplicationError):
        return f"the tool failed ({cause.type}): {cause.message}"
    return f"the tool failed: {error}"
