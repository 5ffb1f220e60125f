"""Malformed plans are rejected before any workflow starts: exit 2, the step and field named."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from plangate.cli import main


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


def mutate(path: str, value: Any) -> dict[str, Any]:
    plan = base()
    target: Any = plan
    *parts, last = path.split("/")
    for p in parts:
        target = target[int(p)] if p.isdigit() else target[p]
    if value is ...:
        del target[last]
    else:
        target[last] = value
    return plan


CASES = {
    "unknown tool": (mutate("steps/1/tool", "warehouse.explode"), "step 2, field tool"),
    "unknown probe": (
        mutate("steps/1/pre", [{"probe": "vibes_ok", "table": "t"}]),
        "step 2, field pre[0].probe",
    ),
    "missing argument": (mutate("steps/1/args/source", ...), "step 2, field args.source"),
    "extra argument": (mutate("steps/0/args/region", "eu"), "step 1, field args.region"),
    "cycle": (mutate("steps/0/depends_on", [2]), "field depends_on: cycle"),
    "dangling dependency": (
        mutate("steps/1/depends_on", [7]),
        "step 2, field depends_on: no step 7",
    ),
    "bad reference": (
        mutate("steps/1/args/source", "${nothing}"),
        "step 2, field args.source: ${nothing}",
    ),
    "injection as a table": (
        mutate("steps/1/args/target", "x; drop table y"),
        "step 2, field args.target",
    ),
    "bad probe argument type": (
        mutate("steps/1/post", [{"probe": "table_rowcount", "table": "staging.t", "min": "many"}]),
        "step 2, field post[0].min",
    ),
    "bad json path": (mutate("steps/0/binds", {"etag": "etag"}), "step 1, field binds.etag"),
    "approval not yet available": (
        mutate("steps/1/approval", "required"), "step 2, field approval"
    ),
    "path outside the work directory": (
        mutate("steps/0/args/dest", "../../etc/passwd"),
        "step 1, field args.dest",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
async def test_rejected_before_any_workflow(name, tmp_path, stack, client, monkeypatch, capsys):
    plan, expected = CASES[name]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    run_id = f"rejected-{name.replace(' ', '-')}"
    code = await asyncio.to_thread(main, ["run", str(path), "--id", run_id, "--wait"])
    err = capsys.readouterr().err
    assert code == 2
    assert expected in err, err
    with pytest.raises(RPCError) as e:
        await client.get_workflow_handle(run_id).describe()
    assert e.value.status == RPCStatusCode.NOT_FOUND


def test_check_accepts_a_valid_plan(tmp_path, capsys):
    path = tmp_path / "plan.yaml"
    path.write_text(json.dumps(base()))
    assert main(["check", str(path)]) == 0
    assert "is valid" in capsys.readouterr().out


def test_unreadable_and_non_plan_files(tmp_path):
    assert main(["check", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "list.json").write_text("[1, 2]")
    assert main(["check", str(tmp_path / "list.json")]) == 2
