"""The failure-class router over a table of situations."""

from __future__ import annotations

import pytest

from plans.model import Effect, OnUnmet
from workflows.router import Answer, Kind, Situation, route

W, M, X, R = Effect.WRITE, Effect.MONEY, Effect.EXTERNAL, Effect.READ

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
    (Kind.TOOL_ERROR, W, OnUnmet.REPLAN, {"status": 409}, Answer.REPLAN),
    (Kind.TOOL_ERROR, W, OnUnmet.HALT, {"status": 409}, Answer.HALT),
    (Kind.TOOL_ERROR, W, OnUnmet.REPLAN, {"status": 412, "retries_left": True}, Answer.RETRY),
    (Kind.TOOL_ERROR, W, OnUnmet.REPLAN, {"status": 412}, Answer.REPLAN),
    (Kind.TOOL_ERROR, W, OnUnmet.REPLAN, {"status": 403, "retries_left": True}, Answer.HALT),
    (Kind.TOOL_ERROR, R, OnUnmet.REPLAN,
     {"status": 503, "retryable": True, "retries_left": True}, Answer.RETRY),
    (Kind.TOOL_ERROR, R, OnUnmet.REPLAN, {"status": 503, "retryable": True}, Answer.REPLAN),
    (Kind.TOOL_ERROR, W, OnUnmet.REPLAN, {"status": 422, "retries_left": True}, Answer.REPLAN),
]


@pytest.mark.parametrize(("kind", "effect", "on_unmet", "extra", "answer"), TABLE)
def test_route(kind, effect, on_unmet, extra, answer):
    decision = route(Situation(kind=kind, effect=effect, on_unmet=on_unmet, **extra))
    assert decision.answer is answer
    assert decision.reason


def test_every_kind_is_routed():
    for kind in Kind:
        for effect in Effect:
            for on_unmet in OnUnmet:
                assert route(Situation(kind=kind, effect=effect, on_unmet=on_unmet)).answer
