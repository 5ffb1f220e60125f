"""The demo systems (billing, CRM, e-mail and schema ``demo``) exist only where they are turned
on (``PLANGATE_DEMO_SYSTEMS``): a worker without the setting has none of their tools and creates
no ``demo`` schema, ``plangate check`` refuses their tools as unknown, and the re-planner is not
offered them. With the setting, all three see them (the rest of the suite runs that way)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
import pytest_asyncio
from psycopg import sql
from temporalio.client import Client

from plangate.activities.catalogue import catalogue
from plangate.records.replan import ReplanRequest
from plangate.replanner.backends.openai import OpenAIBackend
from plangate.testing import FakeOpenAI
from plangate.worker.assembly import activities, build_worker
from plangate.world.clients import World
from plangate.world.settings import DEMO_SYSTEMS_VAR, Settings

DEMO_PREFIXES = ("billing.", "customer.", "email.")
CREDIT_PLAN = {
    "goal": "credit the customer",
    "steps": [
        {"n": 1, "tool": "billing.issue_credit", "effect": "money",
         "args": {"account_id": "acct_1", "amount_eur": 10},
         "post": [{"probe": "effect_recorded"}]},
    ],
}


def demo_tools(names: Iterable[str]) -> list[str]:
    return sorted(n for n in names if n.startswith(DEMO_PREFIXES))


@pytest.fixture
def without(settings: Settings) -> Settings:
    return replace(
        settings, catalogue=replace(settings.catalogue, demo_systems=False),
        temporal=replace(settings.temporal, task_queue=f"nodemo-{uuid.uuid4().hex[:8]}"),
    )


def test_the_setting_is_read_from_the_environment():
    assert Settings.from_env({}).catalogue.demo_systems is False
    for on in ("1", "true", "YES", "on"):
        assert Settings.from_env({DEMO_SYSTEMS_VAR: on}).catalogue.demo_systems is True
    for off in ("0", "false", "no", "off", ""):
        assert Settings.from_env({DEMO_SYSTEMS_VAR: off}).catalogue.demo_systems is False
    with pytest.raises(ValueError, match="PLANGATE_DEMO_SYSTEMS must be 1 or 0"):
        Settings.from_env({DEMO_SYSTEMS_VAR: "maybe"})


def test_the_catalogue_follows_the_setting(settings, without):
    assert demo_tools(catalogue(without.catalogue).tools) == []
    assert {"s3.get", "s3.put", "warehouse.load", "warehouse.run_sql"} <= set(
        catalogue(without.catalogue).tools
    )
    assert "billing.issue_credit" in catalogue(settings.catalogue).tools


def test_the_worker_activities_follow_the_setting(settings, without):
    assert demo_tools(activities(World(without.world), without)) == []
    assert "probe.evaluate" in activities(World(without.world), without)
    assert "billing.issue_credit" in activities(World(settings.world), settings)


async def test_the_replanner_is_offered_only_the_deployments_tools(settings, without):
    req = ReplanRequest.model_validate({
        "goal": "g",
        "completed": [],
        "failure": {"step": 1, "tool": "s3.get", "plan_version": 1, "code": "not_found",
                    "retryable": False},
        "remaining": [],
        "budget": {"replans_used": 0, "replans_max": 1},
    })
    demo_names = ("billing.issue_credit", "customer.update", "email.send")
    with FakeOpenAI(responses=['{"steps": [], "reason": "none"}'] * 2) as fake:
        for s, offered in ((without, False), (settings, True)):
            backend = OpenAIBackend.from_settings(
                replace(s.model, replanner="openai", base_url=fake.base_url), s.catalogue
            )
            await backend.propose(req)
            await backend.close()
            system = fake.completions[-1].messages[0]["content"]
            assert "warehouse.load" in system
            assert all((name in system) is offered for name in demo_names), s.catalogue


@pytest_asyncio.fixture(loop_scope="session")
async def fresh_database(settings: Settings, pg) -> str:
    """A database of its own on the stack's server. It is left for the stack's end: a DROP
    DATABASE would force a checkpoint in the middle of the session."""
    name = f"fresh_{uuid.uuid4().hex[:10]}"
    await pg.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return psycopg.conninfo.make_conninfo(settings.world.database_url, dbname=name)


async def schemas(url: str) -> tuple[bool, bool]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT to_regnamespace('plangate') IS NOT NULL, to_regnamespace('demo') IS NOT NULL"
        )
        row = await cur.fetchone()
    assert row is not None
    return row[0], row[1]


@pytest.mark.parametrize("demo_systems", [False, True], ids=["without the setting", "with it"])
async def test_a_worker_creates_the_demo_schema_only_with_the_setting(
    client: Client, settings: Settings, fresh_database: str, demo_systems: bool
):
    s = replace(
        settings, catalogue=replace(settings.catalogue, demo_systems=demo_systems),
        world=replace(settings.world, database_url=fresh_database),
        temporal=replace(settings.temporal, task_queue=f"schema-{uuid.uuid4().hex[:8]}"),
    )
    world = World(s.world)
    try:
        async with await build_worker(client, s, world):  # bootstraps its tables, then polls
            assert await schemas(fresh_database) == (True, demo_systems)
    finally:
        await world.close()


async def check_in_a_fresh_process(plan: Path, env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "plangate", "check", str(plan),
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


async def test_check_refuses_a_demo_tool_without_the_setting(tmp_path, settings):
    plan = tmp_path / "credit.json"
    plan.write_text(json.dumps(CREDIT_PLAN))
    env = {k: v for k, v in os.environ.items() if k != DEMO_SYSTEMS_VAR}
    env["PLANGATE_WORKDIR"] = str(settings.world.workdir)
    code, err = await check_in_a_fresh_process(plan, env)
    assert code == 2, err
    assert "step 1, field tool: unknown tool 'billing.issue_credit'" in err
    code, err = await check_in_a_fresh_process(plan, {**env, DEMO_SYSTEMS_VAR: "1"})
    assert code == 0, err
