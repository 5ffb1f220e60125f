"""Bad plans are refused before any workflow starts: by `plangate check` and by `plangate run`,
exit 2, a message that names the step and the field, and no workflow in Temporal.

The corpus is ``tests/bad_plans/`` (``expected.json``: file name -> a fragment of the message);
the big ones (over a limit of ``plans.limits``) are written by the test into ``tmp_path``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from plangate.activities.catalogue import catalogue
from plangate.cli import main
from plangate.plans import checking
from plangate.plans.checking import _ancestors
from plangate.plans.load import PlanError, load_file
from plangate.plans.model import Plan, Step
from plangate.plans.problem import Problem
from tests.harness import DEMO_CATALOGUE


def problems(plan: Plan) -> list[Problem]:
    return checking.problems(plan, catalogue(DEMO_CATALOGUE))


# The documented limit (docs/plans.md), written here rather than imported from plans.limits.
MAX_STEPS = 1000

CORPUS = Path(__file__).parent / "bad_plans"
EXPECTED: dict[str, str] = json.loads((CORPUS / "expected.json").read_text())


def select_one(n: int, **extra: Any) -> dict[str, Any]:
    return {"n": n, "tool": "warehouse.run_sql", "effect": "read",
            "args": {"statement": "select_one"}, **extra}


def put(n: int, body: str, **extra: Any) -> dict[str, Any]:
    return {"n": n, "tool": "s3.put", "args": {"bucket": "vendor-drops", "key": f"k{n}",
                                               "body": body}, **extra}


def chain(count: int) -> list[dict[str, Any]]:
    """A descending chain: step ``count`` first, each step depending on the one above it."""
    return [select_one(n, depends_on=[n + 1] if n < count else []) for n in range(1, count + 1)]


def alias_bomb() -> str:
    """A few hundred bytes of YAML that expand to 9**9 strings (the "billion laughs")."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    return "goal: g\nsteps: [{n: 1, tool: warehouse.run_sql, args: {statement: select_one}}]\n" \
        + "\n".join(lines) + "\n"


def write_big(tmp: Path, name: str) -> Path:
    path = tmp / name
    if name == "too_many_steps.json":
        path.write_text(json.dumps({"goal": "g", "steps": [select_one(n) for n in range(1, 1002)]}))
    elif name == "descending_chain_1200.json":
        path.write_text(json.dumps({"goal": "g", "steps": chain(1200)}))
    elif name == "plan_over_256k.json":
        body = "x" * (60 * 1024)  # each argument under its limit, the plan over its own
        path.write_text(json.dumps({"goal": "g", "steps": [put(n, body) for n in range(1, 6)]}))
    elif name == "argument_over_64k.json":
        path.write_text(json.dumps({"goal": "g", "steps": [put(1, "x" * (65 * 1024))]}))
    elif name == "condition_argument_over_64k.json":
        post = [{"probe": "object_content_equals", "bucket": "vendor-drops", "key": "k1",
                 "body": "y" * (65 * 1024)}]
        path.write_text(json.dumps({"goal": "g", "steps": [put(1, "y", post=post)]}))
    elif name == "file_over_1m.json":
        # a sparse 2 GiB file: refused by its size, never read (reading it would take a while)
        path.write_text(json.dumps({"goal": "g", "steps": [select_one(1)]}))
        with path.open("r+b") as f:
            f.truncate(2 * 1024**3)
    elif name == "alias_bomb.yaml":
        path.write_text(alias_bomb())
    else:
        raise AssertionError(name)
    return path


BIG = {
    "too_many_steps.json": "plan, field steps: 1001 steps; a plan has at most 1000 steps",
    "descending_chain_1200.json": "plan, field steps: 1200 steps; a plan has at most 1000",
    "plan_over_256k.json": "bytes as JSON; a plan is at most 262,144 bytes",
    "argument_over_64k.json": "step 1, field args.body: 66,562 bytes as JSON; an argument value "
    "is at most 65,536 bytes",
    "condition_argument_over_64k.json": "step 1, field post[0].body: 66,562 bytes as JSON",
    "file_over_1m.json": "2,147,483,648 bytes; a plan file is at most 1,048,576 bytes",
    "alias_bomb.yaml": "YAML anchors and aliases are not accepted in a plan (line 3, column 4)",
}
PLANS = {**EXPECTED, **BIG}


def test_the_corpus_is_big_enough():
    files = {p.name for p in CORPUS.iterdir()} - {"expected.json"}
    assert files == set(EXPECTED), "every file in tests/bad_plans/ has an expected fragment"
    assert len(PLANS) >= 40 and any(n.endswith(".yaml") for n in EXPECTED)


@pytest.fixture
def stack_env(stack, settings, monkeypatch):
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PLANGATE_WORKDIR", str(settings.world.workdir))


@pytest.mark.parametrize("name", sorted(PLANS))
async def test_refused_by_check_and_run_and_no_workflow(name, tmp_path, stack_env, client,
                                                        capsys):
    path = write_big(tmp_path, name) if name in BIG else CORPUS / name
    expected = PLANS[name]
    run_id = f"corpus-{Path(name).stem}-{uuid.uuid4().hex[:8]}"
    for argv in (["check", str(path)], ["run", str(path), "--id", run_id, "--wait"]):
        code = await asyncio.to_thread(main, argv)
        captured = capsys.readouterr()
        assert code == 2, (argv, captured.err)
        assert expected in captured.err, captured.err
        assert len(captured.err.splitlines()) == 1 and "Traceback" not in captured.err
        assert captured.out == ""
    with pytest.raises(RPCError) as e:
        await client.get_workflow_handle(run_id).describe()
    assert e.value.status == RPCStatusCode.NOT_FOUND


def test_an_alias_bomb_is_refused_at_its_first_anchor(tmp_path):
    path = write_big(tmp_path, "alias_bomb.yaml")
    t0 = time.perf_counter()
    with pytest.raises(PlanError):
        load_file(path)
    # not a timing test: a loader that expanded the bomb would take seconds and hundreds of MB
    print(f"alias bomb refused in {(time.perf_counter() - t0) * 1000:.1f} ms")


def test_a_device_that_never_ends_is_read_no_further_than_the_limit(capsys):
    # /dev/zero has no size to stat: reading stops one byte past the limit
    assert main(["check", "/dev/zero"]) == 2
    assert "more than 1,048,576 bytes" in capsys.readouterr().err


def test_long_dependency_chains_need_no_recursion():
    # The most steps a plan may have (1,000), in one descending chain: ordered without recursion.
    plan = Plan.model_validate({"goal": "g", "steps": chain(MAX_STEPS)})
    assert problems(plan) == []
    # and far past what the old recursive walk could take (built without validation)
    long = Plan.model_construct(goal="g", steps=[Step.model_validate(s) for s in chain(5000)])
    ancestors = _ancestors(long)
    assert ancestors[1] == set(range(2, 5001)) and ancestors[5000] == set()


def test_a_long_cycle_names_its_steps():
    steps = chain(MAX_STEPS)
    steps[-1]["depends_on"] = [1]
    (found,) = problems(Plan.model_validate({"goal": "g", "steps": steps}))
    assert found.startswith("step 1, field depends_on: cycle 1 -> 2 -> 3")
    assert found.endswith("-> 999 -> 1000 -> 1 (1000 steps)")


def test_limits_are_not_refusals_of_ordinary_plans(tmp_path):
    # Right at the limits: a 7-day wait polled every second, an argument of 64 KiB.
    body = "x" * (64 * 1024 - 2)  # the quotes make it exactly the limit
    plan = {"goal": "g", "steps": [
        put(1, body),
        select_one(2, post=[{"probe": "job_state", "job_id": "j", "want": "done",
                             "wait": {"timeout_s": 7 * 24 * 3600, "interval_s": 1}}]),
    ]}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert problems(load_file(path)) == []


def base() -> dict[str, Any]:
    return {
        "goal": "g",
        "steps": [
            {
                "n": 1,
                "tool": "s3.get",
                "effect": "read",
                "args": {"bucket": "vendor-drops", "key": "k.csv", "dest": "w/k.csv"},
                "binds": {"etag": "$.etag"},
            },
            {
                "n": 2,
                "tool": "warehouse.load",
                "depends_on": [1],
                "args": {"target": "staging.t", "source": "w/k.csv"},
            },
        ],
    }


def test_check_accepts_a_valid_plan(tmp_path, capsys):
    path = tmp_path / "plan.yaml"
    path.write_text(json.dumps(base()))
    assert main(["check", str(path)]) == 0
    assert "is valid" in capsys.readouterr().out


def test_deferred_statement_params_are_checked_after_binding(tmp_path, capsys):
    # params with a ${name} are validated at run time, once bound; the statement name is not
    plan = base()
    plan["steps"][1] = {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
                        "args": {"statement": "set_job_state",
                                 "params": {"job_id": "${etag}", "state": "seen"}}}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert main(["check", str(path)]) == 0
    plan["steps"][1]["args"]["statement"] = "set_everything"
    path.write_text(json.dumps(plan))
    assert main(["check", str(path)]) == 2
    assert "step 2, field args.statement: no registered statement" in capsys.readouterr().err


def test_unreadable_and_non_plan_files(tmp_path, capsys):
    assert main(["check", str(tmp_path / "missing.json")]) == 2
    assert main(["check", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert "cannot read: No such file or directory" in err[0]
    assert "a directory, not a plan file" in err[1]
