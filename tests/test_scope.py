"""What a plan may read and write: never plangate's own schema or the system catalogues; within
PLANGATE_ALLOWED_BUCKETS and PLANGATE_ALLOWED_SCHEMAS when a deployment sets them, names compared
exactly as the SQL quotes them. Refused by ``check``, again by the tool at run time, after
binding, with out_of_scope (403): the run halts for a person and nothing is read or written; a
probe refuses too (never a pass). Job ids are scoped by run: no run satisfies another's wait."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from plangate.activities.bootstrap import SchemaNotReady, ensure_schema, require_schema
from plangate.activities.extensions import registry_for
from plangate.activities.tools._statements import BUILDS
from plangate.activities.tools.statements import (
    STATEMENTS,
    IndexParams,
    JobParams,
    NoParams,
    Params,
    SampleParams,
    TableParams,
)
from plangate.plans.load import parse_plan
from plangate.plans.model import Effect
from plangate.plans.scope import Scope
from plangate.records.run import RunInput
from plangate.testing import ended, history_events, running_worker, scheduled, until_state
from plangate.workflows.plan_run import PlanRunWorkflow
from plangate.world.clients import World
from tests.harness import polling_plan, unchecked_worker
from tests.inputs import after, staged


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


def test_reads_are_scoped_and_names_are_exact():
    anywhere = Scope.parse(None, None)
    for secret in ("pg_catalog.pg_authid", "PG_CATALOG.pg_authid", "information_schema.tables",
                   "pg_toast.pg_toast_1260", "plangate.jobs", "Plangate.loads"):
        assert "is never readable by a plan" in str(anywhere.refusal("table", secret, read=True))
    assert anywhere.refusal("table", "staging.t", read=True) is None
    assert "never readable" in str(
        Scope(protected_buckets=("art",)).refusal("bucket", "art", read=True)
    )
    narrow = Scope.parse("drops", "staging,public.audit")
    for kind_read in (False, True):
        # the SQL quotes: STAGING.x is schema "STAGING", which the list does not name
        why = str(narrow.refusal("table", "STAGING.x", read=kind_read))
        assert "STAGING.x is not in PLANGATE_ALLOWED_SCHEMAS" in why and "exact" in why
        assert "not in PLANGATE_ALLOWED_SCHEMAS" in str(
            narrow.refusal("table", "public.Audit", read=kind_read)
        )
        assert narrow.refusal("table", "staging.x", read=kind_read) is None
    assert "not in" in str(Scope.parse(None, "Staging").refusal("table", "staging.x"))
    assert "PLANGATE_ALLOWED_BUCKETS" in str(narrow.refusal("bucket", "payroll", read=True))
    assert narrow.refusal("job", "any-job") is None  # scoped by run where jobs are stored


def test_every_tool_declares_what_it_writes(settings):
    """A tool that is not a read declares what it writes, and no declared target is plangate's
    bookkeeping; a statement that declares no write only selects, and one whose parameters
    name a table declares that table as read or written."""
    tools = registry_for(replace(settings.catalogue, demo_systems=True)).tools
    anywhere = Scope()
    for name, spec in tools.items():
        assert spec.effect is Effect.READ or spec.writes, f"{name} declares no writes"
        for w in spec.writes:
            if w.name is not None:
                assert anywhere.refusal(w.kind, w.name) is None, (name, w)
    examples: dict[type[Params], dict[str, Any]] = {
        NoParams: {}, TableParams: {"table": "t"}, SampleParams: {"table": "t"},
        IndexParams: {"name": "ix", "table": "t", "column": "c"},
        JobParams: {"job_id": "j", "state": "done"},
    }
    assert set(BUILDS) == set(STATEMENTS)  # each declared statement has its SQL, no other has
    for name, stmt in STATEMENTS.items():
        text = BUILDS[name](stmt.params.model_validate(examples[stmt.params]), "run").as_string()
        assert stmt.writes or text.lstrip().startswith("SELECT "), (name, text)
        if "table" in stmt.params.model_fields:
            named = [n.arg for n in (*stmt.reads, *stmt.writes)]
            assert "params.table" in named, f"{name} does not declare its table"


async def start_unchecked(h: Any, plan: dict[str, Any]) -> Any:
    # The tool's own refusal is under test: the plan goes straight to the workflow, on a
    # worker whose own check misses it (``unchecked_worker``).
    handle = await h.client.start_workflow(
        PlanRunWorkflow.run,
        RunInput(plan=parse_plan(plan)),
        id=f"unchecked-{uuid.uuid4().hex[:8]}",
        task_queue=h.queue,
    )
    return await ended(handle)


async def test_a_write_outside_the_allowed_buckets_is_refused_by_the_tool(client, settings, s3):
    tag = uuid.uuid4().hex[:8]
    ok, payroll = f"scope-ok-{tag}", f"scope-payroll-{tag}"
    for b in (ok, payroll):
        s3.create_bucket(Bucket=b)
    def put(**extra: str) -> dict[str, Any]:
        return {"goal": "publish", "budget": {"replans_max": 1}, "steps": [
            {"n": 1, "tool": "s3.put",
             "args": {"bucket": payroll, "key": "r.txt", "body": "hello", **extra}},
        ]}

    narrow = replace(settings, world=replace(settings.world, allowed_buckets=ok))
    async with unchecked_worker(client, narrow) as h:
        # if_none_match given: no read of the version the write would carry (object_version)
        rep = await start_unchecked(h, put(if_none_match="*"))
        versioned = await start_unchecked(h, put())
    assert rep.status == "halted" and rep.replans_used == 0
    assert rep.failure is not None and rep.failure.code == "out_of_scope"
    assert rep.failure.status == 403 and "PLANGATE_ALLOWED_BUCKETS" in rep.failure.detail
    assert (await scheduled(client, rep.run_id))["s3.put"] == 1
    # the version read before the write is refused first: a pre condition that does not hold
    assert versioned.failure is not None and versioned.failure.code == "precondition_unmet"
    assert "out_of_scope: bucket" in versioned.failure.detail
    assert (await scheduled(client, versioned.run_id))["s3.put"] == 0
    assert s3.list_objects_v2(Bucket=payroll).get("KeyCount", 0) == 0


@pytest.mark.parametrize("target", ["plangate.loads", "plangate.jobs"])
async def test_plangates_own_tables_are_never_a_load_target(client, settings, pg, s3, target):
    source = f"scope-{uuid.uuid4().hex[:8]}/own.csv"
    fetch = staged(s3, source, "target,source_sha256\nx,y\n")
    cur = await pg.execute(f"SELECT count(*) FROM {target}")  # the test's own literal name
    before = (await cur.fetchone())[0]
    plan = {"goal": "load", "budget": {"replans_max": 0}, "steps": after(fetch, {
        "tool": "warehouse.load", "args": {"target": target, "source": source}})}
    async with unchecked_worker(client, settings) as h:
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
    narrow = replace(settings, world=replace(settings.world, allowed_schemas="staging"))
    async with unchecked_worker(client, narrow) as h:
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


def test_check_refuses_reads_outside_the_scope_and_names_not_exactly_allowed(
    tmp_path, monkeypatch, capsys
):
    from plangate.cli import main

    def sample(n: int, table: str) -> dict[str, Any]:
        return {"n": n, "tool": "warehouse.run_sql",
                "args": {"statement": "sample_rows", "params": {"table": table}}}

    plan = {"goal": "look around", "steps": [
        sample(1, "pg_catalog.pg_authid"),
        sample(2, "plangate.jobs"),
        {"n": 3, "tool": "warehouse.run_sql", "args": {"statement": "select_one"},
         "post": [{"probe": "table_rowcount", "table": "plangate.loads", "min": 0}]},
        {"n": 4, "tool": "s3.get",
         "args": {"bucket": "scope-payroll", "key": "k", "dest": "scope/k.csv"}},
        {"n": 5, "tool": "warehouse.load",
         "args": {"target": "STAGING.evil", "source": "scope/k.csv"}},
        {"n": 6, "tool": "warehouse.run_sql", "args": {"statement": "select_one"},
         "pre": [{"probe": "column_exists", "table": "public.payroll", "column": "iban"}]},
        sample(7, "staging.fine"),
    ]}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    monkeypatch.setenv("PLANGATE_ALLOWED_BUCKETS", "scope-ok")
    monkeypatch.setenv("PLANGATE_ALLOWED_SCHEMAS", "staging")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    for line in (
        "step 1, field args.params.table: pg_catalog.pg_authid: schema pg_catalog is never "
        "readable by a plan",
        "step 2, field args.params.table: plangate.jobs: schema plangate is never readable",
        "step 3, field post[0].table: plangate.loads: schema plangate is never readable",
        "step 4, field args.bucket: bucket scope-payroll is not in PLANGATE_ALLOWED_BUCKETS",
        "step 5, field args.target: STAGING.evil is not in PLANGATE_ALLOWED_SCHEMAS",
        "step 6, field pre[0].table: public.payroll is not in PLANGATE_ALLOWED_SCHEMAS",
    ):
        assert line in err, err
    assert "step 7" not in err


def stored(events: list[Any]) -> bytes:
    """The history as the server keeps it (payloads are plain JSON in these tests)."""
    return b"".join(e.SerializeToString() for e in events)


async def test_an_in_scope_sample_reaches_the_history(client, settings, pg):
    """The control for the refusals below: what sample_rows reads is in the history and the
    report, where a search for it finds it."""
    tag = uuid.uuid4().hex[:8]
    await pg.execute(f"CREATE TABLE public.scope_seen_{tag} (v text)")
    await pg.execute(f"INSERT INTO public.scope_seen_{tag} VALUES ('marker-{tag}')")
    plan = {"goal": "look", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "sample_rows", "params": {"table": f"scope_seen_{tag}"}}},
    ]}
    async with unchecked_worker(client, settings) as h:
        rep = await start_unchecked(h, plan)
    assert rep.status == "succeeded", rep.failure
    assert f"marker-{tag}".encode() in stored(await history_events(client, rep.run_id))
    assert f"marker-{tag}" in rep.model_dump_json()


@pytest.mark.parametrize("table", ["pg_catalog.pg_authid", "plangate.jobs", "plangate.loads"])
async def test_sampling_a_protected_table_is_refused_by_the_tool(client, settings, pg, table):
    """Nothing is read: no row of the table (a role's SCRAM hash, a job, a load) reaches the
    history or the report."""
    tag = uuid.uuid4().hex[:8]
    role, marker = f"scope_role_{tag}", f"marker-{tag}"
    await pg.execute(sql.SQL("CREATE ROLE {} PASSWORD 'hunter2'").format(sql.Identifier(role)))
    await pg.execute("INSERT INTO plangate.jobs (job_id, state) VALUES (%s, %s)", (marker, marker))
    await pg.execute(
        "INSERT INTO plangate.loads (target, source_sha256, rows, idempotency_key) "
        "VALUES (%s, %s, 0, %s)", (marker, marker, marker),
    )
    plan = {"goal": "look", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "sample_rows", "params": {"table": table}}},
    ]}
    try:
        async with unchecked_worker(client, settings) as h:
            rep = await start_unchecked(h, plan)
        # the worker's own check refuses the same raw start before anything runs
        async with running_worker(client, settings) as h:
            checked = await start_unchecked(h, plan)
    finally:
        await pg.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
    assert checked.status == "failed" and checked.failure is not None
    assert checked.failure.code == "bad_plan" and "never readable" in checked.failure.detail
    assert (await scheduled(client, checked.run_id)).get("warehouse.run_sql", 0) == 0
    assert rep.status == "halted" and rep.failure is not None
    assert (rep.failure.code, rep.failure.status) == ("out_of_scope", 403)
    schema = table.split(".")[0]
    assert f"{table}: schema {schema} is never readable by a plan" in rep.failure.detail
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == 1
    history = stored(await history_events(client, rep.run_id))
    for secret in (b"SCRAM-SHA-256", role.encode(), marker.encode()):
        assert secret not in history
        assert secret.decode() not in rep.model_dump_json()


async def test_a_probe_naming_a_protected_table_is_refused_never_a_pass(client, settings, pg):
    tag = uuid.uuid4().hex[:8]
    plan = {"goal": "look", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": tag, "state": "done"}},
         "pre": [{"probe": "table_rowcount", "table": "plangate.jobs", "min": 0},
                 {"probe": "column_exists", "table": "pg_catalog.pg_authid",
                  "column": "rolpassword"}]},
    ]}
    async with unchecked_worker(client, settings) as h:
        rep = await start_unchecked(h, plan)
    assert rep.status != "succeeded" and rep.failure is not None
    assert rep.failure.code == "precondition_unmet"
    assert "out_of_scope: plangate.jobs: schema plangate is never readable" in rep.failure.detail
    results = [r for c in rep.step(1).checks for r in c.results
               if r.condition.probe in ("table_rowcount", "column_exists")]
    assert results and all(r.outcome == "violated" and r.observed is None for r in results)
    assert {r.detail for r in results} >= {
        "out_of_scope: plangate.jobs: schema plangate is never readable by a plan",
        "out_of_scope: pg_catalog.pg_authid: schema pg_catalog is never readable by a plan",
    }
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == 0
    cur = await pg.execute("SELECT count(*) FROM plangate.jobs WHERE job_id = %s", (tag,))
    assert (await cur.fetchone())[0] == 0


async def test_a_schema_named_in_another_case_is_refused_and_never_created(
    client, settings, pg, s3
):
    """``STAGING.x`` with ``staging`` allowed: the SQL would quote it, schema "STAGING"."""
    tag = uuid.uuid4().hex[:8]
    source = f"scope-{tag}/evil.csv"
    fetch = staged(s3, source, "a\n1\n")

    async def upper_schemas() -> int:
        cur = await pg.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'STAGING'")
        return int((await cur.fetchone())[0])

    assert await upper_schemas() == 0
    plan = {"goal": "load", "budget": {"replans_max": 0}, "steps": after(fetch, {
        "tool": "warehouse.load", "args": {"target": f"STAGING.evil_{tag}", "source": source}})}
    narrow = replace(settings, world=replace(settings.world, allowed_schemas="staging"))
    async with unchecked_worker(client, narrow) as h:
        rep = await start_unchecked(h, plan)
    assert rep.status == "halted" and rep.failure is not None
    assert (rep.failure.code, rep.failure.status) == ("out_of_scope", 403)
    assert f"STAGING.evil_{tag} is not in PLANGATE_ALLOWED_SCHEMAS" in rep.failure.detail
    assert await upper_schemas() == 0


async def job_rows(pg: Any, job: str) -> list[tuple[str | None, str]]:
    cur = await pg.execute(
        "SELECT owner, state FROM plangate.jobs WHERE job_id = %s ORDER BY owner NULLS FIRST",
        (job,),
    )
    return [(r[0], r[1]) for r in await cur.fetchall()]


async def test_a_run_cannot_set_another_runs_job_or_an_outside_one(client, settings, pg):
    """Run A requests job J and waits for it to be done; run B sets J done (and the outside
    world's gate G closed): B's rows are its own, A waits on, G stays open. Then the world
    moves A's job and A goes on."""
    tag = uuid.uuid4().hex[:8]
    job, gate = f"job-{tag}", f"gate-{tag}"
    a_id, b_id = f"scope-a-{tag}", f"scope-b-{tag}"
    await pg.execute("INSERT INTO plangate.jobs (job_id, state) VALUES (%s, 'open')", (gate,))
    b_plan = {"goal": "meddle", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
         "post": [{"probe": "job_state", "job_id": job, "want": "done"}]},
        {"n": 2, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": gate, "state": "closed"}},
         "post": [{"probe": "job_state", "job_id": gate, "want": "closed"}]},
    ]}
    async with running_worker(client, settings) as h:
        a = await h.start(polling_plan(job, interval_s=1), run_id=a_id)
        await until_state(a, 1, "WAITING")  # A's read has seen its job requested
        b = await h.run(b_plan, run_id=b_id)
        assert b.status == "succeeded", b.failure  # B sees its own rows
        assert await job_rows(pg, job) == [(a_id, "requested"), (b_id, "done")]
        assert await job_rows(pg, gate) == [(None, "open"), (b_id, "closed")]
        reads = len(await history_events(client, a_id))
        for _ in range(100):  # A reads again (a read a second) after B is done
            await asyncio.sleep(0.1)
            if len(await history_events(client, a_id)) > reads + 2:
                break
        waiting = await a.query(PlanRunWorkflow.report)
        assert waiting.status == "running" and waiting.step(1).state == "WAITING"
        latest = waiting.step(1).checks[-1].results[0]
        assert (latest.outcome, latest.detail) == ("violated", f"job {job} is requested, not done")
        await pg.execute(
            "UPDATE plangate.jobs SET state = 'done' WHERE job_id = %s AND owner = %s",
            (job, a_id),
        )
        done = await a.result()
    assert done.status == "succeeded", done.failure


async def test_the_jobs_table_of_an_older_plangate_is_migrated_in_place(settings, pg):
    """A database from before jobs had owners: its jobs stay (the outside world's), ids scoped
    by owner from then on; setting up again changes nothing."""
    name = f"scope_mig_{uuid.uuid4().hex[:8]}"
    await pg.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_conninfo(settings.world.database_url, dbname=name)
    try:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as old:
            await old.execute(
                "CREATE SCHEMA plangate; CREATE TABLE plangate.jobs (job_id text PRIMARY KEY, "
                "state text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())"
            )
            await old.execute("INSERT INTO plangate.jobs (job_id, state) VALUES ('j', 'done')")
            world = World(replace(settings.world, database_url=url))
            try:
                with pytest.raises(SchemaNotReady, match="missing"):  # loads: not yet there
                    await require_schema(world)
                await old.execute("CREATE TABLE plangate.loads (target text)")
                with pytest.raises(SchemaNotReady, match="older plangate"):
                    await require_schema(world)
                await ensure_schema(world, settings.catalogue)
                await ensure_schema(world, settings.catalogue)
                await require_schema(world)
            finally:
                await world.close()
            cur = await old.execute("SELECT job_id, state, owner FROM plangate.jobs")
            assert await cur.fetchall() == [("j", "done", None)]
            cur = await old.execute(
                "SELECT conname FROM pg_constraint WHERE conrelid = 'plangate.jobs'::regclass "
                "AND contype = 'p'"
            )
            assert await cur.fetchall() == []
            # a run's own j beside the outside world's; a second outside j is refused
            await old.execute(
                "INSERT INTO plangate.jobs (job_id, state, owner) VALUES ('j', 'requested', 'r')"
            )
            with pytest.raises(psycopg.errors.UniqueViolation):
                await old.execute("INSERT INTO plangate.jobs (job_id, state) VALUES ('j', 'x')")
            with pytest.raises(psycopg.errors.UniqueViolation):
                await old.execute(
                    "INSERT INTO plangate.jobs (job_id, state, owner) VALUES ('j', 'x', 'r')"
                )
    finally:
        await pg.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
