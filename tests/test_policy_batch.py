"""A plan version's steps decided in one Cedar call, and the call taking the guards' decision
(issue 50), by Cedar's own engine (``cedarpy``, counted, never replaced):

- ``decide_all`` decides each call as ``decide`` does alone, in one Cedar call; two calls that
  name one resource under two tools (its entity differs) go to Cedar apart;
- ``recall`` gives the decision remembered for the very same request (compared canonically,
  the time aside), dated at the call, without asking Cedar; any field changed, another bundle,
  or policies that read the time, the check's observations or the totals: nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import cedarpy
import pytest

from plangate.plans.model import Effect
from plangate.records.policy import PolicyRequest, ResourceRef, Totals
from tests.test_policies import EXAMPLES, MONDAY_10, bundle, credit, example, said

BASE = ("base.cedar", EXAMPLES['Default deny: start from "permit all"'])


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many requests each Cedar call carried, in order."""
    calls: list[int] = []
    real = cedarpy.is_authorized_batch

    def counted(requests: list[dict[str, Any]], *a: Any, **kw: Any) -> Any:
        calls.append(len(requests))
        return real(requests, *a, **kw)

    monkeypatch.setattr(cedarpy, "is_authorized_batch", counted)
    return calls


def test_a_plan_versions_steps_are_one_cedar_call_each_decided_as_alone(asked: list[int]):
    b = bundle(BASE, ("cap.cedar", EXAMPLES["A cap"]),
               ("people.cedar", EXAMPLES["A threshold for a person"]))
    version = [credit(50), credit(1500), credit(500), credit(1e300),
               PolicyRequest(tool="billing.get_invoice", effect=Effect.READ, now=MONDAY_10)]
    alone = [b.decide(r) for r in version]
    assert len(asked) == 4  # the value Cedar cannot hold is never put to it
    asked.clear()
    together = b.decide_all(version)
    assert together == alone
    assert [said(d) for d in together] == [
        ("permit", ("base",), 0), ("forbid", ("credit-cap",), 0),
        ("permit_with_people", ("base", "person-over-100"), 1), ("forbid", (), 0),
        ("permit", ("base",), 0)]
    resources = sum(len(r.resources or (None,)) for r in version[:3]) + 1
    assert asked == [resources]


def test_one_resource_named_by_two_tools_goes_to_cedar_apart(asked: list[int]):
    b = bundle(BASE, ("no-delete.cedar", '@id("no-delete")\nforbid(principal, action, resource)'
                                         ' when { resource.tool == "s3.delete" };\n'))
    obj = (ResourceRef(kind="bucket", name="reports", key="q3.csv"),)
    put, delete, get = (PolicyRequest(tool=t, effect=e, resources=obj, now=MONDAY_10)
                        for t, e in (("s3.put", Effect.WRITE), ("s3.delete", Effect.WRITE),
                                     ("s3.put", Effect.WRITE)))
    together = b.decide_all([put, delete, get])
    assert asked == [2, 1]  # put and get share the object's entity; delete's differs
    assert [said(d) for d in together] == [("permit", ("base",), 0),
                                           ("forbid", ("no-delete",), 0),
                                           ("permit", ("base",), 0)]
    asked.clear()
    assert together == [b.decide(r) for r in (put, delete, get)]


def test_the_call_takes_the_guards_decision_for_the_very_same_request(asked: list[int]):
    b = example("A threshold for a person")
    guards = credit(500)
    d = b.decide(guards)
    b.remember(guards, d)
    asked.clear()
    later = MONDAY_10 + timedelta(minutes=3)
    at_call = guards.model_copy(update={"now": later})
    taken = b.recall(at_call)
    assert asked == []  # Cedar not asked
    assert taken == b.decide(at_call) and taken is not None and taken.decided_at == later
    assert said(taken) == ("permit_with_people", ("base", "person-over-100"), 1)
    # anything the decision reads changed: decided again
    for changed in ({"approvals": 1}, {"submitter": "agent-8"}, {"principal": "erin"},
                    {"effect": Effect.WRITE}, {"approval_asked": True},
                    {"args": {"account_id": "acct_7a01c", "amount_eur": 500.01}}):
        assert b.recall(at_call.model_copy(update=changed)) is None, changed
    # the same policies again are the same bundle; another file is another bundle
    assert example("A threshold for a person").recall(at_call) == taken
    other = bundle(BASE, ("people.cedar", EXAMPLES["A threshold for a person"]),
                   ("cap.cedar", EXAMPLES["A cap"]))
    assert other.bundle != b.bundle and other.recall(at_call) is None


@pytest.mark.parametrize("heading", ["Business hours", "A rate limit"])
def test_policies_that_read_what_changes_decide_at_every_call(heading: str):
    b = example(heading)
    r = credit(50, totals=Totals(amount_cents_hour=1))
    b.remember(r, b.decide(r))
    assert not b.recalls and b.recall(r) is None


def test_policies_that_read_the_checks_observations_decide_at_every_call():
    b = bundle(BASE, ("seen.cedar", '@id("seen")\nforbid(principal, action, resource) when '
                      '{ context.observed.contains({condition: "c", value: "v"}) };\n'))
    r = credit(50)
    b.remember(r, b.decide(r))
    assert (b.reads, b.recall(r)) == (frozenset({"observed"}), None)
