"""A plan's problems carry their place (step, field) as values, not only in their line: each is
a ``Problem``, a ``str`` whose text is the line ``plangate check`` prints, unchanged."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from plangate.activities.catalogue import catalogue, plan_problems
from plangate.client.checked import check
from plangate.mcp.server import problem
from plangate.plans import checking
from plangate.plans.load import PlanError, load_file, load_text, parse_plan
from plangate.plans.problem import Problem
from plangate.records.replan import Review
from plangate.world.settings import Settings, WorldSettings
from tests.harness import DEMO_CATALOGUE

PUT: dict[str, Any] = {
    "tool": "s3.put", "args": {"bucket": "vendor-drops", "key": "k", "body": "x"},
}
SQL: dict[str, Any] = {"tool": "warehouse.run_sql", "args": {"statement": "select_one"}}


def plan(*steps: Any) -> dict[str, Any]:
    return {"goal": "g", "steps": list(steps)}


def found(raw: dict[str, Any]) -> list[Problem]:
    """The problems of ``raw``, whether loading or checking finds them."""
    try:
        return checking.problems(parse_plan(raw), catalogue(DEMO_CATALOGUE))
    except PlanError as e:
        return e.problems


def place(p: Problem) -> tuple[int | str | None, str | None, str]:
    assert isinstance(p, Problem), type(p)
    return p.step, p.field, p.why


@pytest.mark.parametrize(("raw", "line", "where"), [
    pytest.param(
        plan({"n": 1, **PUT}, {"n": 2, "tool": "s3.shred", "args": {}, "depends_on": [1]}),
        "step 2, field tool: unknown tool 's3.shred'", (2, "tool"), id="unknown tool"),
    pytest.param(
        plan({"n": 4, **PUT, "args": {**PUT["args"], "bucket": 7}}),
        "step 4, field args.bucket: Input should be a valid string", (4, "args.bucket"),
        id="bad argument type"),
    pytest.param(
        plan({"n": 1, "tool": "s3.put", "args": {"key": "k", "body": "x"}}),
        "step 1, field args.bucket: Field required", (1, "args.bucket"), id="missing argument"),
    pytest.param(
        plan({"n": 1, **SQL, "depends_on": [9]}),
        "step 1, field depends_on: no step 9", (1, "depends_on"), id="dangling depends_on"),
    pytest.param(
        plan({"n": 1, **SQL, "depends_on": [1]}),
        "step 1, field depends_on: a step cannot depend on itself", (1, "depends_on"),
        id="depends on itself"),
    pytest.param(
        plan({"n": 1, **SQL, "depends_on": [2]}, {"n": 2, **SQL, "depends_on": [1]}),
        "step 1, field depends_on: cycle 1 -> 2 -> 1", (1, "depends_on"), id="cycle"),
    pytest.param(
        plan({"n": 3, **SQL}, {"n": 3, **SQL}),
        "step 3, field n: used by more than one step", (3, "n"), id="duplicate n"),
    pytest.param(
        plan({"n": 1, **SQL}, {"n": "two", **SQL}),
        "step #2, field n: Input should be a valid integer, unable to parse string as an "
        "integer", ("#2", "n"), id="no usable n"),
    pytest.param(
        plan({"n": 1, **SQL}, {"n": 2**70, **SQL}),
        "step #2, field n: an integer beyond 64 bits; integers in a plan are between "
        "-9,223,372,036,854,775,808 and 9,223,372,036,854,775,807", ("#2", "n"),
        id="n beyond 64 bits"),
    pytest.param(
        plan({"n": 1, **SQL}, 5),
        "step #2, field (step): Input should be a valid dictionary or instance of Step",
        ("#2", None), id="a step that is no object"),
    pytest.param(
        plan({"n": 1, **PUT, "args": {**PUT["args"], "body": "${total}"}}),
        "step 1, field args.body: ${total} is bound by no step", (1, "args.body"),
        id="reference bound by no step"),
    pytest.param(
        plan({"n": 1, **SQL, "binds": {"total": "$.rows[0].n"}},
             {"n": 2, **PUT, "args": {**PUT["args"], "body": "${total}"}}),
        "step 2, field args.body: ${total} is bound by step 1, which step 2 does not depend on",
        (2, "args.body"), id="reference bound by a step not depended on"),
    pytest.param(
        plan({"n": 1, **SQL, "post": [{"probe": "no_such_probe"}]}),
        None, (1, "post[0].probe"), id="unknown probe"),
    pytest.param(
        {"steps": [{"n": 1, **SQL}]},
        "plan, field goal: Field required", (None, "goal"), id="plan without a goal"),
])
def test_each_problem_names_its_step_and_field(
    raw: dict[str, Any], line: str | None, where: tuple[int | str | None, str | None]
) -> None:
    problems = found(raw)
    assert problems, raw
    first = problems[0]
    if line is not None:
        assert first == line  # the line as it always was
    assert (first.step, first.field) == where
    assert first.endswith(f": {first.why}")


def test_strict_lint_keeps_the_place_and_marks_the_line() -> None:
    raw = plan({"n": 1, **SQL})
    (warning,) = checking.lint(parse_plan(raw), catalogue(DEMO_CATALOGUE))
    assert place(warning) == (1, None, warning.removeprefix("step 1: "))
    assert not warning.lint

    settings = Settings.from_env({"PLANGATE_DEMO_SYSTEMS": "1"}, connects=False)
    with pytest.raises(PlanError) as e:
        check(raw, settings, strict=True)
    (strict,) = e.value.problems
    assert strict == f"(strict) {warning}" and str(e.value) == strict
    assert place(strict) == place(warning) and strict.lint

    post = [{"probe": "table_rowcount", "table": "t", "min": 5, "max": 5}]
    strict_found = plan_problems(
        parse_plan(plan({"n": 2, **SQL, "post": post})), DEMO_CATALOGUE, WorldSettings(),
        strict=True,
    )
    exact = next(p for p in strict_found if "exact row count" in p)
    assert exact.startswith("(strict) step 2, field post[0]: an exact row count")
    assert (exact.step, exact.field, exact.lint) == (2, "post[0]", True)


def test_problems_of_the_whole_plan_or_its_file(tmp_path: Path) -> None:
    with pytest.raises(PlanError) as e:
        load_text("[1, 2]")
    assert e.value.problems == ["plan: a plan is an object with goal and steps"]
    assert place(e.value.problems[0]) == (None, None, "a plan is an object with goal and steps")

    with pytest.raises(PlanError) as e:
        load_file(tmp_path)
    assert e.value.problems == [f"{tmp_path}: a directory, not a plan file"]
    assert place(e.value.problems[0]) == (None, None, "a directory, not a plan file")

    with pytest.raises(PlanError) as e:
        parse_plan(["not", "a", "plan"])
    (root,) = e.value.problems
    assert root.startswith("plan, field (root): ") and (root.step, root.field) == (None, None)


def test_plain_strings_are_problems_of_the_whole_plan() -> None:
    e = PlanError(["plan: somebody else's line", Problem.at(2, "tool", "unknown tool 'x'")])
    assert str(e) == "plan: somebody else's line; step 2, field tool: unknown tool 'x'"
    plain, built = e.problems
    assert place(plain) == (None, None, "plan: somebody else's line")  # never parsed
    assert place(built) == (2, "tool", "unknown tool 'x'")


def test_a_problem_is_a_string_everywhere_it_goes() -> None:
    p = Problem.at("#3", "n", "Field required").strict()
    for other in [copy.copy(p), copy.deepcopy(p),
                  *(pickle.loads(pickle.dumps(p, protocol=v)) for v in range(6))]:
        assert type(other) is Problem and other == p
        assert (other.step, other.field, other.why, other.lint) == ("#3", "n", "Field required",
                                                                    True)
    assert json.dumps([p]) == '["(strict) step #3, field n: Field required"]'
    assert repr(p) == repr(str(p)) and hash(p) == hash(str(p))
    e = pickle.loads(pickle.dumps(PlanError([p, "plan: other"])))
    assert e.problems == [p, "plan: other"] and e.problems[0].step == "#3"
    assert str(e) == f"{p}; plan: other"
    review = Review(problems=[p])
    assert review.model_dump(mode="json") == {"problems": [str(p)], "plan": None}
    assert Review.model_validate_json(review.model_dump_json()).problems == [p]


def test_the_mcp_front_door_reads_the_place_not_the_line() -> None:
    cases = {
        Problem.at(2, "args.bucket", "Field required"): (2, "args.bucket", None),
        Problem.at(2, None, "why").strict(): (2, None, None),
        Problem.at("#3", "n", "why"): (None, "n", 3),
        Problem.at(None, "goal", "Field required"): (None, "goal", None),
        Problem.plan("too big"): (None, None, None),
        # a field the old regex cut short at its colon
        Problem.at(1, "args['a:b']", "why"): (1, "args['a:b']", None),
        Problem.at(-1, "tool", "why"): (-1, "tool", None),
    }
    for p, (step, field, position) in cases.items():
        got = problem(p)
        assert (got.step, got.field, got.position, got.message) == (step, field, position, p)
