"""Each problem of a policy file at its place (issue 48): the five mistakes a user made (and a
template), each named at its exact line and column, by the real path (``bundle_of``, Cedar's
parser and validator through ``cedarpy``, the demo catalogue's schema); three problems of three
policies each named; ``plangate policy check`` printing them. Pure: no service is needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from plangate.activities.catalogue import catalogue
from plangate.plans.scope import Scope
from plangate.world.policies import PolicyFileError, bundle_of
from plangate.world.policies.lexer import tokens
from plangate.world.settings import CatalogueSettings, PolicySettings
from tests.test_policy_cli import PAGE, directory, fresh_env, plangate

DEMO = catalogue(CatalogueSettings(demo_systems=True))

NESTED = """@id("hourly-cap")
forbid(principal, action, resource)
when {
  context.totals.amount_cents_hours > 100000
};
"""
SINGLE_EQUALS = """@id("credits")
permit(principal, action == Plangate::Action::"money", resource)
when { context.tool = "billing.issue_credit" };
"""
UNCLOSED = """@id("big")
forbid(principal, action, resource)
when { (context.amount_cents > 100000 &&
  context.tool == "billing.issue_credit" };
@id("base")
permit(principal, action, resource);
"""
NO_SEMICOLON = """@id("base")
permit(principal, action, resource)
@id("cap")
forbid(principal, action, resource) when { context.amount_cents > 100000 };
"""
STRING_AND_NUMBER = """@id("odd")
forbid(principal, action, resource)
when {
  context.amount_cents > 100 &&
  context.tool > 5
};
"""
# a syntax error in one policy, a type and an attribute in others: each named
THREE_POLICIES = """@id("base")
permit(principal, action, resource);
@id("cap") forbid(principal, action, resource)
when { context.totals.calls_hour > 10 && context.args.amount_eur = 5 };
@id("shop")
forbid(principal, action, resource) unless {
  context.tool == "billing.issue_credit" || context.approvals
};
@id("night") forbid(principal, action, resource) when { context.now.hours < 6 };
"""


def problems(name: str, text: str) -> list[str]:
    with pytest.raises(PolicyFileError) as e:
        bundle_of([(name, text.encode())], PolicySettings(policies=Path("/p")), Scope(), DEMO)
    return [str(p) for p in e.value.problems]


@pytest.mark.parametrize(("name", "text", "named"), [
    ("nested.cedar", NESTED,
     "nested.cedar:4:18: attribute `totals.amount_cents_hours` in context not found"),
    ("equals.cedar", SINGLE_EQUALS,
     "equals.cedar:3:21: '=' is not a valid operator in Cedar"),
    ("paren.cedar", UNCLOSED, "paren.cedar:3:8: `(` is never closed"),
    ("semicolon.cedar", NO_SEMICOLON, "semicolon.cedar:2:36: a policy ends with ;"),
    ("types.cedar", STRING_AND_NUMBER,
     "types.cedar:5:3: unexpected type: expected Long but saw String"),
    ("slot.cedar", "permit(principal, action, resource);\n\n"
                   "permit(principal == ?principal, action, resource);\n",
     "slot.cedar:3:21: templates (?principal, ?resource) are not plangate policies"),
])
def test_each_mistake_is_named_where_it_is_made(name, text, named):
    assert problems(name, text) == [named]


def test_every_policy_with_a_problem_is_named():
    assert problems("three.cedar", THREE_POLICIES) == [
        "three.cedar:4:66: '=' is not a valid operator in Cedar",
        "three.cedar:7:45: unexpected type: expected Bool but saw Long",
        "three.cedar:9:69: attribute `now.hours` in context not found",
    ]


def test_cedar_tokens_are_whole():
    text = 'Plangate::Action::"a\\"b" && x>=1 || !(y!=2) //c\n ?principal<=z'
    assert [t.text for t in tokens(text)] == [
        "Plangate", "::", "Action", "::", '"a\\"b"', "&&", "x", ">=", "1", "||", "!", "(",
        "y", "!=", "2", ")", "?principal", "<=", "z"]


def test_policy_check_prints_each_place_and_exits_2(tmp_path):
    """The example of docs/policy.md, as a user runs it, beside a file left open."""
    caps = PAGE.split("With `policies/caps.cedar`:\n\n```\n", 1)[1].split("```", 1)[0]
    directory(tmp_path / "policies", **{"caps.cedar": caps, "open.cedar": UNCLOSED})
    done = plangate("policy", "check", "policies", env=fresh_env(), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    lines = done.stderr.splitlines()
    assert lines == [
        "policies/caps.cedar:2:36: a policy ends with ;",
        "policies/caps.cedar:5:18: attribute `totals.amount_cents_hours` in context not found",
        "policies/caps.cedar:9:38: unexpected type: expected Long but saw String",
        "policies/open.cedar:3:8: `(` is never closed",
    ]
    assert "$ plangate policy check policies\n" + "\n".join(lines[:3]) + "\n```" in PAGE
