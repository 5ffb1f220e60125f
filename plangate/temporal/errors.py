"""What a team's workflow sees when plangate's guard stops a call.

    temporalio.exceptions.ActivityError
    └── GuardRefused        a check of the guard did not hold: the activity was not called, or
                            its post condition failed on a fresh read. Its ``cause`` is an
                            ``ApplicationError`` whose ``type`` is plangate's code
                            (``precondition_failed``, ``postcondition_failed``,
                            ``approval_rejected``, ``policy_denied``...), non-retryable, its
                            message naming the condition and what was seen.

A workflow handles it as any failed activity (``except ActivityError``); ``str(error)`` is the
reason, for an agent's model to read (``tool_error_text``). Where the table says ``halt``, or a
money call's outcome is unknown, the workflow itself fails with that ``ApplicationError``,
whatever the team's code catches.
"""

from __future__ import annotations

from temporalio.exceptions import ActivityError, ApplicationError, RetryState


class GuardRefused(ActivityError):
    def __init__(self, activity: str, code: str, detail: str, status: int | None) -> None:
        shown = f" ({status})" if status is not None else ""
        message = f"plangate refused {activity}: {code}{shown}: {detail}"
        super().__init__(
            message, scheduled_event_id=0, started_event_id=0, identity="plangate",
            activity_type=activity, activity_id="", retry_state=RetryState.NON_RETRYABLE_FAILURE,
        )
        self.code, self.detail, self.status = code, detail, status
        self.__cause__ = ApplicationError(message, {"code": code, "status": status,
                                                    "detail": detail},
                                          type=code, non_retryable=True)


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
