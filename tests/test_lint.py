"""Lint in `plangate check`: warnings exit 0; --strict makes them errors."""

from __future__ import annotations

import json
from typing import Any

from plangate.activities.catalogue import catalogue
from plangate.cli import main
from plangate.plans import checking
from plangate.plans.load import parse_plan
from plangate.plans.model import Plan
from plangate.plans.problem import Problem
from tests.harness import DEMO_CATALOGUE


def lint(plan: Plan) -> list[Problem]:
    return checking.lint(plan, catalogue(DEMO_CATALOGUE))


def plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"goal": "g", "steps": list(steps)}


SQL = {"tool": "warehouse.run_sql", "args": {"statement": "select_one"}}


def test_write_without_post_condition():
    (w,) = lint(parse_plan(plan({"n": 1, **SQL})))
    assert "step 1" in w and "no post condition" in w


def test_contract_counts_as_a_post_condition():
    step = {"n": 1, "tool": "warehouse.load", "args": {"target": "t", "source": "f.csv"}}
    assert lint(parse_plan(plan(step))) == []


def test_external_step_needs_a_probe_or_approval():
    warned = lint(parse_plan(plan({"n": 1, **SQL, "effect": "external"})))
    assert any("neither a probe nor approval" in w for w in warned)
    approved = lint(parse_plan(plan({"n": 1, **SQL, "effect": "external",
                                     "approval": "required"})))
    assert not any("neither a probe" in w for w in approved)


def test_exact_count_where_a_minimum_would_do():
    post = [{"probe": "table_rowcount", "table": "t", "min": 61400, "max": 61400}]
    warned = lint(parse_plan(plan({"n": 1, **SQL, "post": post})))
    assert any("exact row count" in w and "post[0]" in w for w in warned)


def test_cli_warns_with_exit_0_and_strict_refuses(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(plan({"n": 1, **SQL, "effect": "money"})))
    assert main(["check", str(path)]) == 0
    assert "warning: step 1" in capsys.readouterr().err
    assert main(["check", "--strict", str(path)]) == 2
    assert "(strict) step 1" in capsys.readouterr().err
