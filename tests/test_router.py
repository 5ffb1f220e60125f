"""The failure-class router over a table of situations."""

from __future__ import annotations

import itertools

import pytest

from plangate.plans.model import Effect, OnUnmet
from plangate.workflows.router import Answer, Kind, Refused, Situation, route

W, M, X, R = Effect.WRITE, Effect.MONEY, Effect.EXTERNAL, Effect.READ
MOVED, STALE, REVOKED = Refused.CONFLICT, Refused.SUPERSEDED, Refused.REVOKED

TABLE = [
    # kind, effect, on_unmet, extra, answer
    (Kind.ALREADY_DONE, W, OnUnmet.REPLAN, {}, Answer.SKIP),
    (Kind.PRE_VIOLATED, W, OnUnmet.REPLAN, {"owed_by_unfinished_step": True}, Answer.WAIT),
    (Kind.PRE_VIOLATED, W, OnUnmet.REPLAN, {}, Answer.REPLAN),
    (Kind.PRE_VIOLATED, W, OnUnmet.HALT, {}, Answer.HALT),
    (Kind.PRE_VIOLATED, W, OnUnmet.RETRY, {"retries_left": True}, Answer.RETRY),
    (Kind.PRE_VIOLATED, W, OnUnmet.RETRY, {"retries_left": False}, Answer.REPLAN),
    (Kind.POST_VIOLATED, W, OnUnmet.REPLAN, {"waits": True}, Answer.WAIT),
    (Kind.POST_VIOLATED, W, OnUnmet.REPLAN, {}, Answer.REPLAN),
    (Kind.POST_VIOLATED, M, OnUnmet.HALT, {}, Answer.HALT),
    (Kind.PROBE_UNKNOWN, W, OnUnmet.REPLAN, {"retries_left": True}, Answer.REPLAN),
    (Kind.PROBE_UNKNOWN, W, OnUnmet.HALT, {}, Answer.HALT),
    (Kind.OUTCOME_UNKNOWN, M, OnUnmet.REPLAN, {"retries_left": True}, Answer.HALT),
    (Kind.OUTCOME_UNKNOWN, X, OnUnmet.RETRY, {"retries_left": True}, Answer.HALT),
    (Kind.OUTCOME_UNKNOWN, W, OnUnmet.REPLAN, {}, Answer.REPLAN),
    (Kind.TOOL_ERROR, W, OnUnmet.REPLAN, {"refused": MOVED}, Answer.REPLAN),
    (Kind.TOOL_ERROR, W, OnUnmet.HALT, {"refused": MOVED}, Answer.HALT),
    # 412: the step has read the world again already; then re-plan, never a blind retry
    (Kind.TOOL_ERROR, W, OnUnmet.REPLAN, {"refused": STALE, "retries_left": True}, Answer.REPLAN),
    (Kind.TOOL_ERROR, W, OnUnmet.RETRY, {"refused": STALE, "retries_left": True}, Answer.REPLAN),
    (Kind.TOOL_ERROR, W, OnUnmet.HALT, {"refused": STALE}, Answer.HALT),
    (Kind.APPROVAL_REFUSED, M, OnUnmet.REPLAN, {"retries_left": True}, Answer.REPLAN),
    (Kind.APPROVAL_REFUSED, M, OnUnmet.HALT, {}, Answer.HALT),
    (Kind.APPROVAL_REFUSED, M, OnUnmet.RETRY, {"retries_left": True}, Answer.RETRY),
    (Kind.TOOL_ERROR, W, OnUnmet.REPLAN, {"refused": REVOKED, "retries_left": True}, Answer.HALT),
    (Kind.TOOL_ERROR, R, OnUnmet.REPLAN,
     {"retryable": True, "retries_left": True}, Answer.RETRY),
    (Kind.TOOL_ERROR, R, OnUnmet.REPLAN, {"retryable": True}, Answer.REPLAN),
    (Kind.TOOL_ERROR, W, OnUnmet.REPLAN, {"retries_left": True}, Answer.REPLAN),
]


@pytest.mark.parametrize(("kind", "effect", "on_unmet", "extra", "answer"), TABLE)
def test_route(kind, effect, on_unmet, extra, answer):
    decision = route(Situation(kind=kind, effect=effect, on_unmet=on_unmet, **extra))
    assert decision.answer is answer
    assert decision.reason


def test_every_situation_gets_the_answer_its_class_deserves():
    """Over every kind, effect, on_unmet and retries left (nothing owed, no wait declared), the
    rules of DESIGN.md section 4 that hold for all of them."""
    for kind, effect, on_unmet, retries_left in itertools.product(
        Kind, Effect, OnUnmet, (False, True)
    ):
        s = Situation(kind=kind, effect=effect, on_unmet=on_unmet, retries_left=retries_left)
        answer = route(s).answer
        # a skip only, and always, when the step's post conditions already held
        assert (answer is Answer.SKIP) == (kind is Kind.ALREADY_DONE), s
        # a wait only for a state a step owes or a declared wait: neither here
        assert answer is not Answer.WAIT, s
        # a retry only while retries are left
        assert retries_left or answer is not Answer.RETRY, s
        # on_unmet: halt means a person looks, whatever failed
        if on_unmet is OnUnmet.HALT and kind is not Kind.ALREADY_DONE:
            assert answer is Answer.HALT, s
        # a money or external step that may have acted is never retried blindly or re-planned
        if effect in (M, X) and kind in (Kind.OUTCOME_UNKNOWN, Kind.POST_VIOLATED):
            assert answer is Answer.HALT, s
