"""The failure-class router: who owes the missing state decides the answer (DESIGN.md §4).

Pure and deterministic; the workflow asks it and records the reason it gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from plangate.plans.model import Effect, OnUnmet
from plangate.records.report import Answer

__all__ = ["Answer", "Kind", "Refused", "Route", "Situation", "route"]


class Kind(StrEnum):
    """What went wrong, as the workflow saw it."""

    ALREADY_DONE = "already_done"  # every post condition held before the call
    PRE_VIOLATED = "pre_violated"
    POST_VIOLATED = "post_violated"
    PROBE_UNKNOWN = "probe_unknown"  # a probe could not answer, retries spent
    TOOL_ERROR = "tool_error"  # the tool said it failed: its outcome is known
    OUTCOME_UNKNOWN = "outcome_unknown"  # timed out / worker died after the request left
    APPROVAL_REFUSED = "approval_refused"  # the card was rejected, or expired unanswered
    SYSTEM_DOWN = "system_down"  # a system a probe reads did not answer at all


class Refused(StrEnum):
    """What a tool's refusal says of the world. A tool sends it as an HTTP-like status (its
    wire value, ``records.codes``); ``of`` converts it once, where the answer arrives."""

    CONFLICT = "conflict"  # 409: the resource moved since the read
    SUPERSEDED = "superseded"  # 412: a version or the policy the call assumed is superseded
    REVOKED = "revoked"  # 403: the authority the step acts under is gone

    @classmethod
    def of(cls, status: int | None) -> Refused | None:
        """The refusal a wire status stands for; None for any other failure."""
        return _BY_STATUS.get(status) if status is not None else None


_BY_STATUS = {409: Refused.CONFLICT, 412: Refused.SUPERSEDED, 403: Refused.REVOKED}


@dataclass(frozen=True)
class Situation:
    kind: Kind
    effect: Effect
    on_unmet: OnUnmet = OnUnmet.REPLAN
    owed_by_unfinished_step: bool = False  # a concurrent step of this plan will establish it
    waits: bool = False  # the failed post condition declares `wait` and its deadline is ahead
    refused: Refused | None = None  # the tool error refused the call (conflict, ...)
    retryable: bool = False
    retries_left: bool = False  # workflow-level retries of the whole step remain


@dataclass(frozen=True)
class Route:
    """The router's answer to a situation, and the reason the report records (not a policy
    decision: that is ``records.policy.Decision``)."""

    answer: Answer
    reason: str


def _unmet(s: Situation, what: str) -> Route:
    if s.on_unmet is OnUnmet.HALT:
        return Route(Answer.HALT, f"{what}; the step says on_unmet: halt")
    if s.on_unmet is OnUnmet.RETRY and s.retries_left:
        return Route(Answer.RETRY, f"{what}; the step says on_unmet: retry")
    return Route(Answer.REPLAN, f"{what}; the rest of the plan is void: re-plan")


def route(s: Situation) -> Route:
    match s.kind:
        case Kind.ALREADY_DONE:
            return Route(Answer.SKIP, "every post condition already holds")
        case Kind.PRE_VIOLATED if s.owed_by_unfinished_step:
            return Route(Answer.WAIT, "a step of this plan that has not finished owes it")
        case Kind.PRE_VIOLATED:
            return _unmet(s, "a pre condition does not hold")
        case Kind.POST_VIOLATED if s.waits:
            return Route(Answer.WAIT, "the post condition declares a wait")
        case Kind.POST_VIOLATED if s.effect.outcome_must_be_known:
            # It acted: a new plan version (a new key) could do it a second time.
            return Route(
                Answer.HALT,
                f"the {s.effect} step acted but its post condition does not hold: "
                "a person must look",
            )
        case Kind.POST_VIOLATED:
            return _unmet(s, "the step did not establish its post condition")
        case Kind.SYSTEM_DOWN if s.waits:
            return Route(Answer.WAIT, "the system did not answer: wait for it, then read again")
        case Kind.SYSTEM_DOWN:
            # An outage is not a reason to re-plan: a new plan would meet the same outage.
            return Route(
                Answer.HALT, "the system did not answer within the outage patience: a person "
                "must look (nothing was re-planned)",
            )
        case Kind.PROBE_UNKNOWN:
            # Retried by the probe activity's policy already. Never a pass: the step fails
            # and recovery follows on_unmet.
            return _unmet(s, "a probe could not answer after its retries")
        case Kind.OUTCOME_UNKNOWN if s.effect.outcome_must_be_known:
            return Route(
                Answer.HALT, f"the outcome of a {s.effect} step is unknown: a person must look"
            )
        case Kind.OUTCOME_UNKNOWN:
            return _unmet(s, "the tool's outcome is unknown")
        case Kind.TOOL_ERROR if s.refused is Refused.REVOKED:
            return Route(Answer.HALT, "authority revoked (403)")
        case Kind.TOOL_ERROR if s.refused is Refused.SUPERSEDED:
            # Re-evaluated already (the step read the world again after the 412): what moved
            # under the plan is not retried blindly.
            if s.on_unmet is OnUnmet.HALT:
                return Route(Answer.HALT, "superseded (412), re-evaluated; on_unmet: halt")
            return Route(Answer.REPLAN, "superseded (412), re-evaluated: re-plan")
        case Kind.APPROVAL_REFUSED:
            return _unmet(s, "the approval was refused or expired")
        case Kind.TOOL_ERROR if s.refused is Refused.CONFLICT:
            if s.on_unmet is OnUnmet.HALT:
                return Route(Answer.HALT, "conflict (409); on_unmet: halt")
            return Route(Answer.REPLAN, "conflict (409): re-plan, do not retry blindly")
        case Kind.TOOL_ERROR if s.retryable and s.retries_left:
            return Route(Answer.RETRY, "transient tool error")
        case Kind.TOOL_ERROR:
            return _unmet(s, "the tool failed")
    raise ValueError(f"no route for {s}")  # unreachable: every Kind is matched above
