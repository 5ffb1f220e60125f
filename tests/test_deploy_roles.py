"""docker-compose.yml's database roles on a real Postgres 16: deploy/postgres/init-roles.sh run
as the postgres image runs it, then plangate on the roles it makes.

- ``plangate setup`` as plangate_owner creates plangate's tables (and the demo systems', which
  the test session turns on); as plangate_worker it may not, and says so;
- the worker's role reads and writes plangate's tables, creates and loads tables in staging,
  and nothing more: no DDL or DELETE on plangate's tables, no other schema, no connection to
  Temporal's databases;
- ``plangate worker --no-setup --check`` (the workers' health check) passes on that role, and a
  worker started with ``--no-setup`` runs a plan (s3.get, warehouse.load into staging and its
  post probes) on the stack's Temporal and S3, for itself and for a principal set up as the
  docs say (docs/authority.md).

The embedded Postgres trusts local connections: the roles and their grants are checked here,
not the passwords.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from plangate.activities.bootstrap import SchemaNotReady, ensure_schema, require_schema
from plangate.cli import main
from plangate.client.api import Plangate
from plangate.dev._stack import HOST, free_port
from plangate.dev._stack._postgres import SUPERUSER, PostgresServer
from plangate.testing import stack_state
from plangate.worker.assembly import build_worker
from plangate.world.clients import World
from plangate.world.settings import Settings

INIT_ROLES = Path(__file__).resolve().parents[1] / "deploy" / "postgres" / "init-roles.sh"


@pytest.fixture(scope="module")
def roles_port() -> Iterator[int]:
    """A Postgres of its own, initialised by the init script; its port."""
    with stack_state("roles") as state:
        server = PostgresServer(data_dir=state / "data", port=free_port(), log_file=state / "log")
        server.start()
        try:
            env = {
                **os.environ,
                "PATH": f"{server.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                "PGHOST": HOST, "PGPORT": str(server.port), "POSTGRES_USER": SUPERUSER,
                "TEMPORAL_DB_PASSWORD": "t-secret", "PLANGATE_OWNER_DB_PASSWORD": "o'secret",
                "PLANGATE_WORKER_DB_PASSWORD": "w-secret",
            }
            proc = subprocess.run(["bash", str(INIT_ROLES)], env=env, capture_output=True,
                                  text=True, timeout=120)
            assert proc.returncode == 0, proc.stderr
            yield server.port
        finally:
            server.stop()


def url(port: int, role: str, db: str = "plangate") -> str:
    return f"postgresql://{role}@{HOST}:{port}/{db}"


def as_role(settings: Settings, port: int, role: str) -> Settings:
    return replace(settings, world=replace(settings.world, database_url=url(port, role)))


@pytest.fixture(scope="module")
def set_up(roles_port: int, settings: Settings) -> int:
    """plangate's tables created by their owner (what plangate-setup does); the port."""

    async def setup() -> None:
        world = World(as_role(settings, roles_port, "plangate_owner").world)
        try:
            await ensure_schema(world, settings.catalogue)
        finally:
            await world.close()

    asyncio.run(setup())
    return roles_port


async def test_setup_is_the_owners_and_the_worker_checks_its_tables(
    roles_port, settings, monkeypatch, capsys
):
    worker = World(as_role(settings, roles_port, "plangate_worker").world)
    try:
        monkeypatch.setenv("PLANGATE_DATABASE_URL", url(roles_port, "plangate_worker"))
        assert await asyncio.to_thread(main, ["setup"]) == 1
        assert "may not create plangate's tables" in capsys.readouterr().err
        if not await _has_tables(roles_port):  # (the plan test may have set them up first)
            missing = (r"plangate\.jobs, plangate\.loads, plangate\.effects, "
                       r"plangate\.policy_decisions, plangate\.windows, "
                       r"plangate\.windows_since, plangate\.submissions, "
                       r"plangate\.runs_index, plangate\.deliveries, plangate\.keys, "
                       r"plangate\.receipts, plangate\.grants, plangate\.grant_uses "
                       r"are missing")
            with pytest.raises(SchemaNotReady, match=missing):
                await require_schema(worker)
        monkeypatch.setenv("PLANGATE_DATABASE_URL", url(roles_port, "plangate_owner"))
        for _ in range(2):  # again: nothing to do, no error
            assert await asyncio.to_thread(main, ["setup"]) == 0
            assert "tables ready" in capsys.readouterr().out
        await require_schema(worker)
    finally:
        await worker.close()


async def _has_tables(port: int) -> bool:
    async with await psycopg.AsyncConnection.connect(url(port, SUPERUSER)) as conn:
        cur = await conn.execute("SELECT to_regclass('plangate.loads') IS NOT NULL")
        row = await cur.fetchone()
        return bool(row and row[0])


async def _denied(conn: psycopg.AsyncConnection[Any], statement: str) -> bool:
    """On an autocommit connection: each statement its own transaction."""
    try:
        await conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege:
        return True
    return False


async def test_the_workers_role_reaches_only_what_plangate_needs(set_up):
    port = set_up
    async with await psycopg.AsyncConnection.connect(
        url(port, "plangate_worker"), autocommit=True
    ) as conn:
        for allowed in (
            # a run's own job, as set_job_state sets it
            "INSERT INTO plangate.jobs (job_id, state, owner) "
            "VALUES ('deploy-test', 'requested', 'deploy-run') "
            "ON CONFLICT (owner, job_id) DO UPDATE SET state = EXCLUDED.state, updated_at = now()",
            "SELECT count(*) FROM plangate.loads",
            "UPDATE demo.customers SET version = version",  # an extension's tables alike
            "CREATE TABLE IF NOT EXISTS staging.deploy_test (id text)",
            "TRUNCATE staging.deploy_test",
        ):
            assert not await _denied(conn, allowed), allowed
        for refused in (
            "DELETE FROM plangate.jobs",
            "TRUNCATE plangate.loads",
            "DROP TABLE plangate.jobs",
            "ALTER TABLE plangate.loads ADD COLUMN x int",
            "CREATE TABLE plangate.x (id int)",
            "CREATE SCHEMA x",
            "CREATE TABLE public.x (id int)",
            "DELETE FROM demo.customers",
            "CREATE ROLE x",
        ):
            assert await _denied(conn, refused), refused
    for db in ("temporal", "temporal_visibility", "postgres"):
        with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
            await psycopg.AsyncConnection.connect(url(port, "plangate_worker", db))
    async with await psycopg.AsyncConnection.connect(
        url(port, "temporal", "temporal"), autocommit=True
    ) as conn:
        assert await _denied(conn, "CREATE DATABASE x")


def saturday(bucket: str, key: str, target: str, on_behalf_of: str | None = None) -> dict[str, Any]:
    plan: dict[str, Any] = {
        "goal": "reconcile March vendor invoices",
        "budget": {"replans_max": 0},
        "steps": [
            {"n": 1, "tool": "s3.get", "effect": "read",
             "args": {"bucket": bucket, "key": key, "dest": f"deploy/{target}.csv"}},
            {"n": 2, "tool": "warehouse.load", "depends_on": [1],
             "args": {"target": target, "source": f"deploy/{target}.csv"},
             "post": [{"probe": "table_rowcount", "table": target, "min": 3}]},
        ],
    }
    if on_behalf_of:
        plan["on_behalf_of"] = on_behalf_of
    return plan


async def test_a_worker_on_the_least_privilege_role_runs_a_plan(
    set_up, client, settings, stack, s3, monkeypatch, capsys
):
    port = set_up
    # the workers' health check, as docker-compose.yml runs it
    for k, v in {**stack.env(), "PLANGATE_DATABASE_URL": url(port, "plangate_worker")}.items():
        monkeypatch.setenv(k, v)
    assert await asyncio.to_thread(main, ["worker", "--no-setup", "--check"]) == 0
    assert "plangate's tables are there" in capsys.readouterr().out

    bucket, tag = f"deploy-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="march.csv", Body=b"id,amount\n1,10\n2,20\n3,30\n")
    # a principal, as docs/authority.md sets one up for this deployment
    dana = f"dana_{tag}"
    async with await psycopg.AsyncConnection.connect(url(port, SUPERUSER), autocommit=True) as su:
        role = sql.Identifier(dana)
        for stmt in (
            "CREATE ROLE {} NOLOGIN",
            "GRANT USAGE, CREATE ON SCHEMA staging TO {}",
            "GRANT {} TO plangate_worker WITH INHERIT FALSE",
            "ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA staging "
            "GRANT SELECT ON TABLES TO plangate_worker",
        ):
            await su.execute(sql.SQL(stmt).format(role))

    ws = as_role(settings, port, "plangate_worker")
    ws = replace(
        ws, temporal=replace(ws.temporal, task_queue=f"deploy-{tag}"),
        world=replace(ws.world, allowed_schemas="staging"),
    )
    async with await build_worker(client, ws, bootstrap=False):
        api = Plangate(client, ws)
        own = await (await api.submit(saturday(bucket, "march.csv", f"staging.own_{tag}"))).result()
        theirs = await (
            await api.submit(saturday(bucket, "march.csv", f"staging.dana_{tag}", dana))
        ).result()
    assert own.status == "succeeded", own.failure
    assert theirs.status == "succeeded", theirs.failure
    async with await psycopg.AsyncConnection.connect(url(port, SUPERUSER)) as su:
        cur = await su.execute(
            "SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'staging' "
            "AND tablename LIKE %s ORDER BY 1", (f"%{tag}",)
        )
        assert await cur.fetchall() == [(f"dana_{tag}", dana), (f"own_{tag}", "plangate_worker")]
        cur = await su.execute(
            "SELECT target, rows FROM plangate.loads WHERE target LIKE %s ORDER BY 1", (f"%{tag}",)
        )
        assert await cur.fetchall() == [(f"staging.dana_{tag}", 3), (f"staging.own_{tag}", 3)]
