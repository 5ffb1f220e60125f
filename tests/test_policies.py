"""The Cedar policy core (``plangate.world.policies``), evaluated by Cedar's own engine
(``cedarpy``), never mocked:

- every worked example of docs/policy.md, read from the page, decides a table of calls as the
  page says (so the page cannot rot);
- a bad file is named at FILE:LINE:COLUMN; duplicate and reserved ids are refused;
- the bundle digest moves with a file, the schema and each deciding setting, and with nothing
  else;
- the built-in policies decide as ``plans.guards.needs_approval`` and ``plans.scope.refusals``;
- an evaluation error, a value Cedar cannot hold and a call no policy permits are forbidden.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from plangate.activities.catalogue import catalogue
from plangate.plans.guards import needs_approval
from plangate.plans.model import Effect
from plangate.plans.scope import Scope, refusals
from plangate.records.policy import Decision, Outcome, PolicyRequest, Totals
from plangate.world.policies import (
    PoliciesUnusable,
    PolicyFileError,
    bundle_of,
    cents,
    load_bundle,
    resources_of,
)
from plangate.world.settings import CatalogueSettings, PolicySettings, Settings

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "policy.md"
DEMO = catalogue(CatalogueSettings(demo_systems=True))
CREDIT = "billing.issue_credit"
MONDAY_10 = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)


def examples() -> dict[str, str]:
    """The cedar block of each section of the page, by heading."""
    text = PAGE.read_text()
    out = {}
    for m in re.finditer(r"^#{2,3} (.+?)\n(.*?)(?=^#{2,3} |\Z)", text, re.S | re.M):
        blocks = re.findall(r"^```cedar\n(.*?)^```", m.group(2), re.S | re.M)
        if blocks:
            (out[m.group(1)],) = blocks
    return out


EXAMPLES = examples()


def policy_settings(**kw: Any) -> PolicySettings:
    return replace(PolicySettings(), **kw)


def bundle(*files: tuple[str, str], scope: Scope | None = None, **kw: Any):
    kw.setdefault("approve_effects", ())  # the page's examples: the policies alone decide
    kw.setdefault("policies", Path("/etc/plangate/policies"))
    return bundle_of([(n, t.encode()) for n, t in files], policy_settings(**kw),
                     scope or Scope(), DEMO)


def credit(eur: float, *, now: datetime = MONDAY_10, approvals: int = 0,
           totals: Totals | None = None) -> PolicyRequest:
    info = DEMO.tools[CREDIT]
    args = {"account_id": "acct_7a01c", "amount_eur": eur}
    return PolicyRequest(
        principal="dana", submitter="agent-7", tool=CREDIT, effect=Effect.MONEY,
        resources=resources_of(CREDIT, info, args), args=args, amount_cents=cents(eur),
        now=now, approvals=approvals, totals=totals or Totals(),
    )


def said(d: Decision) -> tuple[str, tuple[str, ...], int]:
    return d.outcome.value, d.policies, d.approvers


def example(heading: str, **kw: Any):
    return bundle(("base.cedar", EXAMPLES["Default deny: start from \"permit all\""]),
                  ("example.cedar", EXAMPLES[heading]), **kw)


def test_the_page_has_every_worked_example():
    assert set(EXAMPLES) == {
        'Default deny: start from "permit all"', "A cap", "A threshold for a person",
        "Two people", "A rate limit", "Business hours", "Shadow rollout",
    }


def test_a_cap_forbids_credits_over_1000_eur():
    b = example("A cap")
    assert said(b.decide(credit(1500))) == ("forbid", ("credit-cap",), 0)
    assert said(b.decide(credit(1000))) == ("permit", ("base",), 0)
    # rounded away from zero: a policy never sees less than was asked
    assert said(b.decide(credit(1000.001))) == ("forbid", ("credit-cap",), 0)
    d = b.decide(credit(1500))
    assert d.refuses and d.reason == "forbidden by credit-cap" and d.bundle == b.bundle


def test_a_threshold_asks_one_person_over_100_eur():
    b = example("A threshold for a person")
    assert said(b.decide(credit(50))) == ("permit", ("base",), 0)
    assert said(b.decide(credit(100))) == ("permit", ("base",), 0)
    d = b.decide(credit(500))
    assert said(d) == ("permit_with_people", ("base", "person-over-100"), 1)
    assert d.approvals_missing(0) == 1 and d.approvals_missing(1) == 0


def test_two_people_over_10000_eur_one_is_not_enough():
    b = example("Two people")
    assert said(b.decide(credit(10_000))) == ("permit", ("base",), 0)
    d = b.decide(credit(10_000.01, approvals=1))
    assert said(d) == ("permit_with_people", ("base", "two-over-10000"), 2)
    assert d.approvals_missing(1) == 1 and d.approvals_missing(2) == 0


def test_a_rate_limit_counts_the_hour_and_this_call():
    b = example("A rate limit")
    at = Totals(amount_cents_hour=400_000, calls_hour=4)
    assert said(b.decide(credit(1000, totals=at))) == ("permit", ("base",), 0)
    over = Totals(amount_cents_hour=400_001)
    assert said(b.decide(credit(1000, totals=over))) == ("forbid", ("hourly-limit",), 0)
    # an overflow is an error, and an error forbids (Cedar alone would skip the forbid)
    d = b.decide(credit(1000, totals=Totals(amount_cents_hour=2**63 - 1)))
    assert said(d) == ("forbid", ("hourly-limit",), 0)
    assert d.reason == "a policy could not be evaluated (hourly-limit): an error forbids"
    assert len(d.errors) == 1 and "overflow" in d.errors[0]


def test_business_hours_on_weekdays_utc():
    b = example("Business hours")
    saturday = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
    early = datetime(2026, 12, 7, 7, 59, tzinfo=UTC)
    assert said(b.decide(credit(10))) == ("permit", ("base",), 0)
    assert said(b.decide(credit(10, now=saturday))) == ("forbid", ("business-hours",), 0)
    assert said(b.decide(credit(10, now=early))) == ("forbid", ("business-hours",), 0)
    read = PolicyRequest(tool="billing.get_invoice", effect=Effect.READ, now=saturday)
    assert said(b.decide(read)) == ("permit", ("base",), 0)


def _mail(to: str, now: datetime = MONDAY_10) -> PolicyRequest:
    return PolicyRequest(tool="email.send", effect=Effect.EXTERNAL, now=now,
                         args={"to": to, "template": "account_closed"})


def test_shadow_decides_and_records_but_refuses_nothing():
    shadow = example("Shadow rollout", policy_mode="shadow")
    d = shadow.decide(_mail("ceo@elsewhere.test"))
    assert said(d) == ("forbid", ("mail-inside-only",), 0)
    assert d.enforced is False and d.refuses is False
    assert said(shadow.decide(_mail("ops@example.com"))) == ("permit", ("base",), 0)
    enforced = example("Shadow rollout")
    assert enforced.decide(_mail("ceo@elsewhere.test")).refuses
    assert enforced.bundle != shadow.bundle  # the mode is in the digest


def test_a_decision_is_pure_and_dated_by_its_request():
    b = example("A cap")
    r = credit(1500)
    assert b.decide(r) == b.decide(r) and b.decide(r).decided_at == MONDAY_10


# -- default deny and errors ---------------------------------------------------------------------


def test_with_policies_a_call_no_policy_permits_is_forbidden():
    only = bundle(("caps.cedar", EXAMPLES["A cap"]), approve_effects=(Effect.MONEY,))
    read = PolicyRequest(tool="billing.get_invoice", effect=Effect.READ, now=MONDAY_10)
    d = only.decide(read)
    assert said(d) == ("forbid", (), 0) and d.reason == "no policy permits it (default deny)"
    # the approve-effects policy adds a person; it never permits by itself
    d = only.decide(credit(10))
    assert said(d) == ("forbid", (), 0)
    assert d.reason == ("no policy permits it (default deny; only approval policies apply: "
                        "plangate:approve-effects)")


def test_a_value_cedar_cannot_hold_forbids():
    b = example("A cap")
    d = b.decide(credit(1e300))
    assert d.outcome is Outcome.FORBID and d.policies == ()
    assert d.reason == ("the call cannot be put to the policies: args.amount_eur: 1e+300 is "
                        "beyond what Cedar's decimal holds")


def test_a_policy_that_errors_forbids_though_another_permits():
    b = bundle(("base.cedar", EXAMPLES['Default deny: start from "permit all"']),
               ("odd.cedar", "forbid(principal, action, resource)\n"
                "when { context.amount_cents * 100000000000 > 1 };\n"))
    d = b.decide(credit(1_000_000))
    assert said(d) == ("forbid", ("odd.cedar:1",), 0) and len(d.errors) == 1


# -- files: places, ids --------------------------------------------------------------------------


def problems(*files: tuple[str, str]) -> list[str]:
    with pytest.raises(PolicyFileError) as e:
        bundle(*files)
    return [str(p) for p in e.value.problems]


def test_a_bad_file_is_named_at_file_line_column():
    assert problems(("limits.cedar", "// limits\n@id(\"cap\")\nforbid(principal, action, "
                     "resource) when {\n  context.amount > 100000\n};\n")) == [
        "limits.cedar:4:11: attribute `amount` in context not found"]
    assert problems(("syntax.cedar", "permit(principal, action, resource);\n"
                     "permit(principal, action, resource) when { 1 + };\n")) == [
        "syntax.cedar:2:48: unexpected token `}`"]
    assert problems(("types.cedar", "\n\n  permit(principal, action, resource)\n"
                     "  when { context.approvals };\n")) == [
        "types.cedar:4:10: unexpected type: expected Bool but saw Long"]
    with pytest.raises(PolicyFileError) as e:
        bundle_of([("bytes.cedar", b"permit(principal, action, resource);\n  \xff")],
                  policy_settings(policies=Path("/p")), Scope(), DEMO)
    assert str(e.value) == "bytes.cedar:2:3: not UTF-8 text"
    assert problems(("open.cedar", "permit(principal, action, resource)")) == [
        "open.cedar:1:36: a policy ends with ;"]


def test_a_worker_names_the_file_by_its_path(tmp_path):
    (tmp_path / "limits.cedar").write_text("permit(principal, actoin, resource);\n")
    s = policy_settings(policies=tmp_path)
    with pytest.raises(PolicyFileError) as e:
        load_bundle(s, Scope(), DEMO)
    assert e.value.lines() == [
        f"{tmp_path}/limits.cedar:1:19: found an invalid variable in the policy scope: actoin"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PoliciesUnusable) as u:
        load_bundle(policy_settings(policies=empty), Scope(), DEMO)
    assert str(u.value) == (
        f"PLANGATE_POLICIES: {empty} has no .cedar file: every call would be forbidden "
        "(default deny); start from docs/policy.md's permissive base")


def test_ids_are_the_annotation_else_file_and_index_and_unique():
    b = bundle(("a.cedar", "permit(principal, action, resource);\n@id(\"x\")\n"
                "forbid(principal, action, resource) when { false };\n"
                "forbid(principal, action, resource) when { false };\n"))
    assert [i for i in b.ids if not i.startswith("plangate:")] == ["a.cedar:1", "x", "a.cedar:3"]
    assert problems(("a.cedar", '@id("cap")\npermit(principal, action, resource);\n'),
                    ("b.cedar", '\n@id("cap")\npermit(principal, action, resource);\n')) == [
        "b.cedar:2:1: @id 'cap' is taken by a.cedar:1:1"]
    assert problems(("a.cedar", '@id("plangate:permit-all")\n'
                     "permit(principal, action, resource);\n")) == [
        "a.cedar:1:1: @id 'plangate:permit-all': ids plangate:... are plangate's built-in "
        "policies"]
    assert problems(("a.cedar", '@approvers("two")\npermit(principal, action, resource);\n')) \
        == ['a.cedar:1:1: @approvers("two") is not a number of people from 0 to 10']


# -- the bundle ----------------------------------------------------------------------------------


def test_the_bundle_moves_with_what_decides_and_nothing_else(tmp_path):
    policies = tmp_path / "p"
    policies.mkdir()
    (policies / "base.cedar").write_text(EXAMPLES['Default deny: start from "permit all"'])
    (policies / "notes.txt").write_text("not a policy")
    env = {"PLANGATE_POLICIES": str(policies), "PLANGATE_DEMO_SYSTEMS": "1"}

    def of(changes: dict[str, str]) -> str:
        s = Settings.from_env({**env, **changes}, connects=False)
        return load_bundle(s.policy, s.world.scope, catalogue(s.catalogue)).bundle

    first = of({})
    assert re.fullmatch(r"cedar:[0-9a-f]{16}", first)
    # nothing that does not decide
    for unrelated in ({"PLANGATE_APPROVAL_TTL": "2h"}, {"PLANGATE_POLICY_BUNDLE": "p-9"},
                      {"PLANGATE_DATABASE_URL": "postgresql://x@y/z"},
                      {"PLANGATE_TASK_QUEUE": "other"}, {"PLANGATE_POLICY_MODE": "enforce"}):
        assert of(unrelated) == first, unrelated
    (policies / "notes.txt").write_text("still not a policy")
    assert of({}) == first
    moved = tmp_path / "moved"
    policies.rename(moved)
    assert of({"PLANGATE_POLICIES": str(moved)}) == first
    moved.rename(policies)
    # every deciding setting, and the schema (another catalogue: other arguments)
    deciding = [{"PLANGATE_APPROVE_EFFECTS": "money"}, {"PLANGATE_APPROVE_EFFECTS": "none"},
                {"PLANGATE_ALLOWED_BUCKETS": "drops"}, {"PLANGATE_ALLOWED_SCHEMAS": "staging"},
                {"PLANGATE_ARTIFACTS": "s3://art/runs"}, {"PLANGATE_POLICY_MODE": "shadow"},
                {"PLANGATE_DEMO_SYSTEMS": "0"}, {"PLANGATE_POLICIES": ""}]
    seen = {first}
    for changes in deciding:
        b = of(changes)
        assert b not in seen, changes
        seen.add(b)
    # a file's bytes, and its name
    (policies / "base.cedar").write_text(EXAMPLES['Default deny: start from "permit all"'] + " ")
    assert of({}) not in seen
    (policies / "base.cedar").rename(policies / "all.cedar")
    assert of({}) not in seen | {first}


# -- the settings as built-in policies -----------------------------------------------------------


@pytest.mark.parametrize("approve", [(), (Effect.MONEY, Effect.EXTERNAL), (Effect.WRITE,)])
def test_builtin_approvals_decide_as_needs_approval(approve):
    b = bundle(approve_effects=approve, policies=None)
    for effect in Effect:
        for asked_by_plan in (False, True):
            for tool_says in (False, True):
                for replanned in (False, True):
                    want = needs_approval(said=asked_by_plan, effect=effect,
                                          approve_effects=approve, tool_says=tool_says,
                                          replanned=replanned)
                    asked = asked_by_plan or tool_says or (
                        replanned and effect.outcome_must_be_known)
                    d = b.decide(PolicyRequest(tool="t", effect=effect, now=MONDAY_10,
                                               approval_asked=asked))
                    case = (effect, asked_by_plan, tool_says, replanned)
                    assert d.outcome is (Outcome.PERMIT_WITH_PEOPLE if want
                                         else Outcome.PERMIT), case
                    assert d.approvers == (1 if want else 0), case
                    assert "plangate:permit-all" in d.policies


SCOPES = [Scope(), Scope(("drops",), ("staging", "public.t")),
          Scope(None, ("STAGING",), protected_buckets=("art",))]
CALLS = [("s3.put", {"bucket": b, "key": "k", "source": "work/f"})
         for b in ("drops", "other", "art")] + [
    ("warehouse.load", {"target": t, "source": "work/f"})
    for t in ("staging.x", "public.t", "public.u", "t", "u", "STAGING.x", "plangate.runs",
              "PG_catalog.x", "pg_toast.y", "Information_Schema.tables")]


@pytest.mark.parametrize("scope", SCOPES)
def test_builtin_scope_decides_as_scope_refusals(scope):
    b = bundle(scope=scope, policies=None)
    for tool, args in CALLS:
        info = DEMO.tools[tool]
        refused = list(refusals(scope, args, info.reads, info.writes, bound=True))
        d = b.decide(PolicyRequest(tool=tool, effect=info.effect, args=args, now=MONDAY_10,
                                   resources=resources_of(tool, info, args)))
        assert (d.outcome is Outcome.FORBID) == bool(refused), (tool, args, refused, d)
        if refused:
            assert all(p.startswith("plangate:") for p in d.policies) and d.policies, d


def test_without_policies_everything_else_is_permitted_as_before():
    b = bundle(policies=None, approve_effects=(Effect.MONEY, Effect.EXTERNAL))
    assert said(b.decide(credit(1_000_000))) == (
        "permit_with_people", ("plangate:approve-effects", "plangate:permit-all"), 1)
    read = PolicyRequest(tool="billing.get_invoice", effect=Effect.READ, now=MONDAY_10)
    assert said(b.decide(read)) == ("permit", ("plangate:permit-all",), 0)


def test_the_tools_own_totals_are_seen_apart_from_the_principals():
    b = bundle(("base.cedar", EXAMPLES['Default deny: start from "permit all"']),
               ("rate.cedar", '@id("three-credits-an-hour")\n'
                "forbid(principal, action, resource) when { context.totals.tool_calls_hour >= 3 "
                "};\n"))
    busy = Totals(calls_hour=9, amount_cents_hour=900_000)
    assert said(b.decide(credit(10, totals=busy))) == ("permit", ("base",), 0)
    third = Totals(calls_hour=3, tool_calls_hour=3)
    assert said(b.decide(credit(10, totals=third))) == (
        "forbid", ("three-credits-an-hour",), 0)
