"""The plan language: loading, bindings, JSON paths, contracts."""

from __future__ import annotations

import pytest

from plangate.activities.catalogue import catalogue
from plangate.plans import bindings, jsonpath
from plangate.plans.guards import StepGuard, conditions_for, guard, skip_evidence
from plangate.plans.load import PlanError, load_text
from plangate.plans.model import Condition, Effect, Plan
from plangate.world.errors import ToolError
from tests.harness import DEMO_CATALOGUE


def test_yaml_and_json_load_the_same_plan():
    js = '{"goal": "g", "steps": [{"n": 1, "tool": "s3.get", "args": {"bucket": "b"}}]}'
    ym = "goal: g\nsteps:\n  - n: 1\n    tool: s3.get\n    args: {bucket: b}\n"
    assert load_text(js) == load_text(ym)


def test_model_errors_name_the_step_by_its_n():
    with pytest.raises(PlanError) as e:
        load_text('{"goal": "g", "steps": [{"n": 7, "tool": "x", "effect": "telepathy"}]}')
    assert "step 7, field effect" in str(e.value)


def test_whole_reference_keeps_the_type_and_inline_interpolates():
    bound = {"amount": 612.4, "who": "ar@northwind.example"}
    out = bindings.resolve({"a": "${amount}", "b": "to ${who}!", "c": ["${amount}"]}, bound)
    assert out == {"a": 612.4, "b": "to ar@northwind.example!", "c": [612.4]}


def test_unresolved_reference_raises_never_empties():
    with pytest.raises(bindings.BindingError) as e:
        bindings.resolve({"to": "mail ${billing_contact}"}, {}, "args")
    assert "billing_contact" in str(e.value) and "args.to" in str(e.value)


def test_jsonpath():
    doc = {"a": [{"b": 1}, {"b": None}], "c d": 2}
    assert jsonpath.get(doc, "$.a[0].b") == 1
    assert jsonpath.get(doc, "$.a[1].b") is None
    assert jsonpath.get(doc, "$['c d']") == 2
    for bad in ("$.a[5]", "$.x", "a.b", "$..a"):
        with pytest.raises(jsonpath.PathError):
            jsonpath.get(doc, bad) if bad.startswith("$") else jsonpath.parse(bad)


def guard_of(tool: str, **step: object) -> StepGuard:
    plan = Plan.model_validate({"goal": "g", "steps": [{"n": 1, "tool": tool, **step}]})
    return guard(plan, catalogue(DEMO_CATALOGUE)).guard(1)


def test_contract_bound_from_the_steps_own_arguments():
    args = {"bucket": "b", "key": "k", "dest": "d"}
    g = guard_of("s3.get", args=args)
    pre = conditions_for(g, "pre", args, [])
    post = conditions_for(g, "post", args, [])
    assert [c.model_dump() for c in pre] == [{"probe": "object_exists", "bucket": "b", "key": "k"}]
    assert [c.model_dump() for c in post] == [{"probe": "local_file_nonempty", "path": "d"}]


def test_plan_conditions_follow_the_contract_once_each():
    args = {"target": "s.t", "source": "f"}
    plan_post = [Condition(probe="table_rowcount", args={"table": "s.t", "min": 60000}),
                 Condition(probe="table_rowcount", args={"table": "s.t", "min": 1})]
    post = conditions_for(guard_of("warehouse.load", args=args), "post", args, plan_post)
    assert [(c.probe, c.args.get("min")) for c in post] == [
        ("table_rowcount", 1), ("table_loaded_from", None), ("table_rowcount", 60000)
    ]


def test_run_sql_has_no_contract_but_its_statements_may():
    one = {"statement": "select_one"}
    g = guard_of("warehouse.run_sql", args=one)
    assert conditions_for(g, "pre", one, []) == []
    assert conditions_for(g, "post", one, []) == []
    assert skip_evidence(g, one) == []
    job = {"statement": "set_job_state", "params": {"job_id": "j1", "state": "done"}}
    assert conditions_for(g, "post", job, []) == []
    assert [c.model_dump() for c in skip_evidence(g, job)] == [
        {"probe": "job_state", "job_id": "j1", "want": "done"}
    ]


def test_only_identifying_terms_are_skip_evidence():
    load = {"target": "s.t", "source": "f"}
    g = guard_of("warehouse.load", args=load)
    assert [c.probe for c in skip_evidence(g, load)] == ["table_loaded_from"]
    get = {"bucket": "b", "key": "k", "dest": "d"}
    assert skip_evidence(guard_of("s3.get", args=get), get) == []


def test_effect_is_never_weaker_than_the_tools():
    assert guard_of("s3.put", effect="read").effect is Effect.WRITE
    assert guard_of("s3.get", effect="money").effect is Effect.MONEY
    assert catalogue(DEMO_CATALOGUE).effect_of("billing.issue_credit", Effect.WRITE) is Effect.MONEY


def test_tool_error_codes_come_from_one_table():
    e = ToolError("record_archived", "acct_3319f")
    assert (e.status, e.retryable) == (409, False)
    with pytest.raises(ValueError):
        ToolError("made_up")
