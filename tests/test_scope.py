"""Where tools may write: never plangate's own schema; within PLANGATE_ALLOWED_BUCKETS and
PLANGATE_ALLOWED_SCHEMAS when a deployment sets them. Refused again by the tool at run time,
after binding, with out_of_scope (403): the run halts for a person and nothing is written."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import Any

import pytest

from activities.catalogue import catalogue
from plans.guards import guard
from plans.load import parse_plan
from plans.scope import Scope
from records.run import RunInput
from tests.harness import running_worker, scheduled
from workflows.plan_run import PlanRunWorkflow


def test_scope_refusals():
    anywhere = Scope.parse(None, None)
    assert anywhere.refusal("bucket", "any-bucket") is None
    assert anywhere.refusal("table", "staging.t") is None
    for own in ("plangate.loads", "plangate.jobs", "pg_catalog.pg_class", "PLANGATE.x"):
        assert "never a target" in str(anywhere.refusal("table", own))
    narrow = Scope.parse("drops, reports", "staging,public.audit")
    assert narrow.refusal("bucket", "reports") is None
    assert "PLANGATE_ALLOWED_BUCKETS" in str(narrow.refusal("bucket", "payroll"))
    assert narrow.refusal("table", "staging.anything") is None
    assert narrow.refusal("table", "audit") is None  # public.audit
    assert "PLANGATE_ALLOWED_SCHEMAS" in str(narrow.refusal("table", "public.other"))
    assert "never a target" in str(Scope.parse(None, "plangate").refusal("table", "plangate.x"))


async def start_unchecked(h: Any, plan: dict[str, Any]) -> Any:
    # The tool's own refusal is under test: the plan goes straight to the workflow.
    handle = await h.client.start_workflow(
        PlanRunWorkflow.run,
        RunInput(plan=guard(parse_plan(plan), catalogue())),
        id=f"unchecked-{uuid.uuid4().hex[:8]}",
        task_queue=h.settings.task_queue,
    )
    return await handle.result()


async def test_a_write_outside_the_allowed_buckets_is_refused_by_the_tool(client, settings, s3):
    tag = uuid.uuid4().hex[:8]
    ok, payroll = f"scope-ok-{tag}", f"scope-payroll-{tag}"
    for b in (ok, payroll):
        s3.create_bucket(Bucket=b)
    plan = {"goal": "publish", "budget": {"replans_max": 1}, "steps": [
        {"n": 1, "tool": "s3.put", "args": {"bucket": payroll, "key": "r.txt",
                                            "body": "hello"}},
    ]}
    narrow = replace(settings, allowed_buckets=ok)
    async with running_worker(client, narrow) as h:
        rep = await start_unchecked(h, plan)
    assert rep.status == "halted" and rep.replans_used == 0
    assert rep.failure is not None and rep.failure.code == "out_of_scope"
    assert rep.failure.status == 403 and "PLANGATE_ALLOWED_BUCKETS" in rep.failure.detail
    assert (await scheduled(client, rep.run_id))["s3.put"] == 1
    assert s3.list_objects_v2(Bucket=payroll).get("KeyCount", 0) == 0


@pytest.mark.parametrize("target", ["plangate.loads", "plangate.jobs"])
async def test_plangates_own_tables_are_never_a_load_target(client, settings, pg, target):
    source = f"scope-{uuid.uuid4().hex[:8]}/own.csv"
    (settings.workdir / source).parent.mkdir(parents=True)
    (settings.workdir / source).write_text("target,source_sha256\nx,y\n")
    cur = await pg.execute(f"SELECT count(*) FROM {target}")  # the test's own literal name
    before = (await cur.fetchone())[0]
    plan = {"goal": "load", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.load",
         "args": {"target": target, "source": source}},
    ]}
    async with running_worker(client, settings) as h:
        rep = await start_unchecked(h, plan)
    assert rep.status == "halted"
    assert rep.failure is not None and rep.failure.code == "out_of_scope"
    cur = await pg.execute(f"SELECT count(*) FROM {target}")
    assert (await cur.fetchone())[0] == before


async def test_a_table_outside_the_allowed_schemas_is_refused(client, settings, pg):
    tag = uuid.uuid4().hex[:8]
    await pg.execute(f"CREATE TABLE public.scope_{tag} (id int)")
    plan = {"goal": "index", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "create_index",
                  "params": {"name": f"ix_scope_{tag}", "table": f"public.scope_{tag}",
                             "column": "id"}}},
    ]}
    narrow = replace(settings, allowed_schemas="staging")
    async with running_worker(client, narrow) as h:
        rep = await start_unchecked(h, plan)
    assert rep.failure is not None and rep.failure.code == "out_of_scope"
    cur = await pg.execute("SELECT to_regclass(%s)", (f"public.ix_scope_{tag}",))
    assert (await cur.fetchone())[0] is None


def test_check_refuses_writes_outside_the_allowed_scope(tmp_path, monkeypatch, capsys):
    from plangate.cli import main

    plan = {"goal": "publish", "steps": [
        {"n": 1, "tool": "s3.put", "args": {"bucket": "scope-payroll", "key": "r.txt",
                                            "body": "hello"}},
        {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
         "args": {"statement": "analyze", "params": {"table": "finance.ledger"}}},
    ]}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert main(["check", str(path)]) == 0
    monkeypatch.setenv("PLANGATE_ALLOWED_BUCKETS", "scope-ok")
    monkeypatch.setenv("PLANGATE_ALLOWED_SCHEMAS", "staging")
    capsys.readouterr()
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "step 1, field args.bucket: bucket scope-payroll is not in PLANGATE_ALLOWED_BUCKETS" \
        in err
    assert "step 2, field args.params.table: finance.ledger is not in PLANGATE_ALLOWED_SCHEMAS" \
        in err
