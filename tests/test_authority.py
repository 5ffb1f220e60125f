"""Authority and policy are re-checked when a tool acts, not when the plan was made.

- Authority: a run's Postgres work runs under the role its ``on_behalf_of`` names (``SET LOCAL
  ROLE``, world.pg.tool_transaction). A grant revoked after the plan was accepted, or a role that
  does not exist, answers 403 (``authority_revoked``): the run halts and nothing is written.
  Probes read as the worker's own role.
- Policy: a run decided under one policy bundle, on a worker that now enforces another
  (``PLANGATE_POLICY_BUNDLE``), is refused before the tool acts (``policy_superseded``, 412):
  the step is re-evaluated (probes first), then follows its ``on_unmet``.

The test Postgres runs as the superuser ``postgres``; the roles here are ordinary ones, made and
dropped by each test.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
import pytest_asyncio
from psycopg import sql

from plangate.demo.schema import Account, seed_account
from plangate.plans.load import PlanError, parse_plan
from plangate.records.codes import CODES
from plangate.testing import attempts, ended, running_worker, scheduled, until_state
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.pg import tool_transaction
from plangate.world.settings import Settings
from tests.inputs import after, staged

MakeRole = Callable[..., Awaitable[str]]


@pytest_asyncio.fixture(loop_scope="session")
async def make_role(pg: Any) -> AsyncIterator[MakeRole]:
    """``await make_role()``: a new ordinary role (NOLOGIN) named ``analyst_<hex>``, or
    ``name``; dropped at the end with what it owns and what it was granted."""
    made: list[str] = []

    async def make(name: str | None = None) -> str:
        role = name or f"analyst_{uuid.uuid4().hex[:8]}"
        await pg.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
        made.append(role)
        return role

    yield make
    for role in made:
        await pg.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        await pg.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


async def grant_customers(pg: Any, role: str) -> None:
    """What ``customer.update`` needs: read and lock the record, write it."""
    r = sql.Identifier(role)
    await pg.execute(sql.SQL("GRANT USAGE ON SCHEMA demo TO {}").format(r))
    await pg.execute(sql.SQL("GRANT SELECT, UPDATE ON demo.customers TO {}").format(r))


async def active_account(world: World) -> str:
    aid = f"acct_{uuid.uuid4().hex[:8]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example"))
    return aid


async def customer(pg: Any, aid: str) -> tuple[str, int, str | None]:
    cur = await pg.execute(
        "SELECT status, version, last_write_key FROM demo.customers WHERE account_id = %s",
        (aid,),
    )
    row = await cur.fetchone()
    assert row is not None
    return (row[0], row[1], row[2])


UNTOUCHED = ("active", 1, None)
ARCHIVED_AT = datetime(2026, 3, 12, 2, 14, 7, tzinfo=UTC)


def close_plan(aid: str, gate: str, role: str) -> dict[str, Any]:
    """Acting for ``role``: wait (a read a second) until job ``gate`` is ``go``, then close the
    customer record. The wait is the window between planning and acting."""
    return {"goal": f"close {aid}", "on_behalf_of": role, "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "args": {"statement": "select_one"},
         "post": [{"probe": "job_state", "job_id": gate, "want": "go",
                   "wait": {"timeout_s": 3600, "interval_s": 1}}]},
        {"n": 2, "tool": "customer.update", "depends_on": [1],
         "args": {"account_id": aid, "status": "closed"}},
    ]}


async def open_gate(pg: Any, gate: str) -> None:
    await pg.execute(
        "INSERT INTO plangate.jobs (job_id, state) VALUES (%s, 'go') "
        "ON CONFLICT (job_id) WHERE owner IS NULL DO UPDATE SET state = 'go'",
        (gate,),
    )


# -- authority: Postgres roles ---------------------------------------------------------------------
@pytest.mark.parametrize("revoked", [True, False], ids=["revoked", "granted"])
async def test_authority_is_checked_when_the_tool_acts_not_when_the_plan_was_made(
    client, settings, world, pg, make_role, revoked
):
    """Granted when the plan is checked and accepted; while its first step waits, the grant
    is revoked (or left): the write then halts with 403 and writes nothing (or is made)."""
    role = await make_role()
    await grant_customers(pg, role)
    aid, gate = await active_account(world), f"gate-{uuid.uuid4().hex[:8]}"
    async with running_worker(client, settings) as h:
        handle = await h.start(close_plan(aid, gate, role))  # checked and accepted: granted
        await until_state(handle, 1, "WAITING")
        if revoked:
            await pg.execute(
                sql.SQL("REVOKE UPDATE ON demo.customers FROM {}").format(sql.Identifier(role))
            )
        await open_gate(pg, gate)
        rep = await ended(handle)
    # the tool ran once, as the role: never retried
    assert (await attempts(client, rep.run_id))["customer.update"] == [1]
    assert rep.step(1).state == "DONE"
    if not revoked:
        assert rep.status == "succeeded", rep.failure
        status, version, key = await customer(pg, aid)
        assert (status, version) == ("closed", 2) and key is not None
        return
    assert rep.status == "halted", rep.escalation
    assert rep.step(2).state == "HALTED" and rep.step(2).answer == "halt"
    assert rep.failure is not None
    assert (rep.failure.step, rep.failure.code, rep.failure.status) == (2, "authority_revoked", 403)
    # refused by Postgres, as the role: the worker's own role would have been allowed
    assert "permission denied for table customers" in rep.failure.detail
    assert await customer(pg, aid) == UNTOUCHED
    assert rep.replans_used == 0


async def test_a_role_that_does_not_exist_is_authority_gone(client, settings, world, pg):
    aid = await active_account(world)
    ghost = f"ghost_{uuid.uuid4().hex[:8]}"
    plan = {"goal": f"close {aid}", "on_behalf_of": ghost, "budget": {"replans_max": 0},
            "steps": [{"n": 1, "tool": "customer.update",
                       "args": {"account_id": aid, "status": "closed"}}]}
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    assert rep.status == "halted"
    assert rep.failure is not None
    assert (rep.failure.code, rep.failure.status) == ("authority_revoked", 403)
    assert ghost in rep.failure.detail
    # the probes read as the worker, not as the missing role: they answered, they did not fail
    [check] = rep.step(1).checks
    # not closed yet (no skip); the record's version read for the write: both answered
    assert [r.outcome for r in check.results] == ["violated", "holds"]
    assert await customer(pg, aid) == UNTOUCHED
    assert (await attempts(client, rep.run_id))["customer.update"] == [1]


def write_csv(s3: Any, rows: int, tag: str) -> dict[str, Any]:
    """The step that fetches a CSV of ``rows`` rows into the run's directory."""
    name = f"authority/{tag}-{uuid.uuid4().hex[:8]}.csv"
    return staged(s3, name, "id,label\n" + "".join(f"{i},{tag}\n" for i in range(rows)))


def load_plan(target: str, fetch: dict[str, Any], role: str) -> dict[str, Any]:
    return {"goal": f"load {target}", "on_behalf_of": role, "budget": {"replans_max": 0},
            "steps": after(fetch, {"tool": "warehouse.load", "args": {
                "target": target, "source": fetch["args"]["dest"]}})}


async def owner_and_rows(pg: Any, schema: str, table: str) -> tuple[str, int]:
    cur = await pg.execute(
        "SELECT tableowner FROM pg_tables WHERE schemaname = %s AND tablename = %s",
        (schema, table),
    )
    row = await cur.fetchone()
    assert row is not None, f"{schema}.{table} does not exist"
    cur = await pg.execute(
        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, table))
    )
    count = await cur.fetchone()
    assert count is not None
    return row[0], count[0]


async def test_a_load_is_made_as_the_principal_and_recorded_as_the_worker(
    client, settings, pg, make_role, s3
):
    role = await make_role()
    schema = f"own_{uuid.uuid4().hex[:8]}"
    await pg.execute(
        sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
            sql.Identifier(schema), sql.Identifier(role)
        )
    )
    target = f"{schema}.invoices"
    async with running_worker(client, settings) as h:
        rep = await h.run(load_plan(target, write_csv(s3, 5, "own"), role))
    assert rep.status == "succeeded", rep.failure
    # the table the load created belongs to the role it acted as
    assert await owner_and_rows(pg, schema, "invoices") == (role, 5)
    # plangate's own record of the load, in the same transaction, written as the worker: the
    # role may not write it
    cur = await pg.execute(
        "SELECT rows, has_table_privilege(%s, 'plangate.loads', 'INSERT') "
        "FROM plangate.loads WHERE target = %s",
        (role, target),
    )
    assert await cur.fetchone() == (5, False)


async def test_a_load_into_a_table_the_principal_may_only_fill_and_then_may_not(
    client, settings, pg, make_role, s3
):
    """Granted INSERT and TRUNCATE on an existing table (no right to create anything), the
    principal's load succeeds; with INSERT revoked, the next load is 403 and the table keeps
    the rows of the first."""
    role = await make_role()
    schema = f"shared_{uuid.uuid4().hex[:8]}"
    r, s = sql.Identifier(role), sql.Identifier(schema)
    t = sql.Identifier(schema, "invoices")
    await pg.execute(sql.SQL("CREATE SCHEMA {}").format(s))
    await pg.execute(sql.SQL("CREATE TABLE {} (id text, label text)").format(t))
    await pg.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(s, r))
    await pg.execute(sql.SQL("GRANT INSERT, TRUNCATE ON {} TO {}").format(t, r))
    target = f"{schema}.invoices"
    try:
        async with running_worker(client, settings) as h:
            first = await h.run(load_plan(target, write_csv(s3, 3, "first"), role))
            assert first.status == "succeeded", first.failure
            assert await owner_and_rows(pg, schema, "invoices") == ("postgres", 3)
            await pg.execute(sql.SQL("REVOKE INSERT ON {} FROM {}").format(t, r))
            second = await h.run(load_plan(target, write_csv(s3, 7, "second"), role))
        assert second.status == "halted"
        assert second.failure is not None
        assert (second.failure.code, second.failure.status) == ("authority_revoked", 403)
        # the TRUNCATE it was still allowed rolled back with the refused COPY
        assert await owner_and_rows(pg, schema, "invoices") == ("postgres", 3)
        cur = await pg.execute(sql.SQL("SELECT DISTINCT label FROM {}").format(t))
        assert await cur.fetchall() == [("first",)]
        assert (await attempts(client, second.run_id))["warehouse.load"] == [1]
    finally:
        await pg.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(s))


# -- role names: identifiers, never text -----------------------------------------------------------
def test_a_principal_that_could_inject_is_refused_by_the_plan():
    for bad in ('x"; DROP TABLE demo.customers; --', "x; RESET ROLE", "a b", "", "1abc",
                "x" * 64, 'quote"d'):
        with pytest.raises(PlanError) as e:
            parse_plan({"goal": "g", "on_behalf_of": bad,
                        "steps": [{"n": 1, "tool": "warehouse.run_sql",
                                   "args": {"statement": "select_one"}}]})
        assert "on_behalf_of" in str(e.value)


async def test_set_role_quotes_the_name_as_one_identifier(world, pg):
    """Past the plan's pattern (a tool called directly), a name holding SQL is still one quoted
    role name: no such role, 403, and the statement in it never ran."""
    table = f"injected_{uuid.uuid4().hex[:8]}"
    name = f'x"; CREATE TABLE public.{table} (); SET ROLE "postgres'
    with pytest.raises(ToolError) as e:
        async with tool_transaction(world, name) as conn:
            await conn.execute("SELECT 1")
    assert e.value.code == "authority_revoked" and e.value.status == 403
    cur = await pg.execute("SELECT to_regclass(%s)", (f"public.{table}",))
    assert await cur.fetchone() == (None,)


async def test_a_role_named_with_dots_at_signs_dashes_and_capitals_acts(
    client, settings, world, pg, make_role
):
    role = await make_role(f"Ana.Lyst@corp-{uuid.uuid4().hex[:8]}")
    await grant_customers(pg, role)
    aid, gate = await active_account(world), f"gate-{uuid.uuid4().hex[:8]}"
    await open_gate(pg, gate)
    async with running_worker(client, settings) as h:
        rep = await h.run(close_plan(aid, gate, role))
    assert rep.status == "succeeded", rep.failure
    assert (await customer(pg, aid))[:2] == ("closed", 2)
    # and it was that role: as it, the worker's connection sees what the role is
    async with tool_transaction(world, role) as conn:
        cur = await conn.execute("SELECT current_user, session_user")
        assert await cur.fetchone() == (role, "postgres")
    # back in the pool, the connection is the worker's again
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT current_user")
        assert await cur.fetchone() == ("postgres",)


async def test_a_worker_of_its_own_role_acts_only_for_the_principals_it_was_granted(
    settings, pg, make_role, stack
):
    """The deployment of docs/authority.md: the worker logs in as an ordinary role, granted the
    principals' roles without inheriting them. It becomes a principal it was granted; a plan
    naming any other role is authority it does not have, and a superuser is never one: 403."""
    worker, dana = await make_role(), await make_role(f"Dana.{uuid.uuid4().hex[:6]}")
    await pg.execute(sql.SQL("ALTER ROLE {} LOGIN").format(sql.Identifier(worker)))
    await pg.execute(
        sql.SQL("GRANT {} TO {} WITH INHERIT FALSE").format(
            sql.Identifier(dana), sql.Identifier(worker)
        )
    )
    url = stack.database_url.replace("postgres@", f"{worker}@", 1)
    assert url != stack.database_url
    own = World(replace(settings.world, database_url=url))
    try:
        async with tool_transaction(own, dana) as conn:
            cur = await conn.execute("SELECT current_user, session_user")
            assert await cur.fetchone() == (dana, worker)
        # a superuser is never a principal, whoever the worker is; another role, one the
        # worker was not granted, is authority it does not have
        for other, code, why in (
            ("postgres", "not_permitted", "is a superuser role"),
            (await make_role(), "authority_revoked", "permission denied to set role"),
        ):
            with pytest.raises(ToolError) as e:
                async with tool_transaction(own, other):
                    pass
            assert (e.value.code, e.value.status) == (code, 403)
            assert why in e.value.detail
    finally:
        await own.close()


# -- policy: the bundle the run was decided under --------------------------------------------------
def policy_plan(aid: str, bundle: str | None, on_unmet: str) -> dict[str, Any]:
    plan: dict[str, Any] = {"goal": f"close {aid}", "steps": [
        {"n": 1, "tool": "customer.update", "on_unmet": on_unmet,
         "args": {"account_id": aid, "status": "closed"}},
    ]}
    if bundle is not None:
        plan["policy_bundle"] = bundle
    return plan


def test_policy_superseded_is_a_412_that_sent_nothing():
    code = CODES["policy_superseded"]
    assert (code.status, code.retryable, code.may_have_acted) == (412, False, False)
    policy = Settings.from_env({"PLANGATE_POLICY_BUNDLE": " p-2026-04 "}).policy
    assert policy.policy_bundle == "p-2026-04"
    assert Settings.from_env({"PLANGATE_POLICY_BUNDLE": ""}).policy.policy_bundle is None


@pytest.mark.parametrize("on_unmet", ["halt", "replan"])
async def test_a_superseded_policy_is_re_evaluated_then_follows_on_unmet(
    client, settings, world, pg, on_unmet
):
    aid = await active_account(world)
    deployed = replace(settings, policy=replace(settings.policy, policy_bundle="p-2026-04"))
    async with running_worker(client, deployed) as h:
        rep = await h.run(policy_plan(aid, "p-2026-03", on_unmet))
    assert rep.status == "halted", rep.status
    assert rep.failure is not None
    assert (rep.failure.code, rep.failure.status) == ("policy_superseded", 412)
    assert "p-2026-03" in rep.failure.detail and "p-2026-04" in rep.failure.detail
    # refused before it acted, once; then re-evaluated: the world read again, never a blind
    # second call, and the answer follows on_unmet
    step = rep.step(1, plan_version=1)
    assert [c.phase for c in step.checks] == ["skip+pre", "re-evaluate"]
    assert (await attempts(client, rep.run_id))["customer.update"] == [1]
    # the skip+pre read made with the guards (guard.resolve), the re-evaluation on its own
    assert (await scheduled(client, rep.run_id))["probe.evaluate"] == 1
    assert rep.metrics.answers_412 == 1
    assert await customer(pg, aid) == UNTOUCHED
    if on_unmet == "halt":
        assert step.state == "HALTED" and rep.replans_used == 0
    else:
        # re-planned: the playbook has no route around a superseded policy, so a person looks
        assert rep.replans_used == 1 and not rep.replans[0].accepted
        assert "policy_superseded" in (rep.escalation or "")


@pytest.mark.parametrize(
    ("run_bundle", "deployed_bundle"),
    [("p-2026-04", "p-2026-04"), (None, "p-2026-04"), ("p-2026-03", None)],
)
async def test_a_policy_still_in_force_or_unnamed_runs(
    client, settings, world, pg, run_bundle, deployed_bundle
):
    aid = await active_account(world)
    deployed = replace(settings, policy=replace(settings.policy, policy_bundle=deployed_bundle))
    async with running_worker(client, deployed) as h:
        rep = await h.run(policy_plan(aid, run_bundle, "halt"))
    assert rep.status == "succeeded", rep.failure
    assert (await customer(pg, aid))[:2] == ("closed", 2)
    assert (await attempts(client, rep.run_id))["customer.update"] == [1]


# -- a re-planned version acts for the same principal ---------------------------------------------
async def test_a_replanned_version_acts_for_the_same_principal(
    client, settings, world, pg, make_role
):
    """The principal may close a record but not un-archive one. Its update of an archived
    record is refused (409, record_archived); the playbook's recovery (restore, then update)
    must act for the same principal, so the restore is 403 and the record stays archived."""
    role = await make_role()
    r = sql.Identifier(role)
    await pg.execute(sql.SQL("GRANT USAGE ON SCHEMA demo TO {}").format(r))
    await pg.execute(
        sql.SQL(
            "GRANT SELECT, UPDATE (status, billing_contact, version, last_write_key) "
            "ON demo.customers TO {}"
        ).format(r)
    )
    aid = f"acct_{uuid.uuid4().hex[:8]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", archived_at=ARCHIVED_AT))
    plan = {"goal": f"close {aid}", "on_behalf_of": role, "steps": [
        {"n": 1, "tool": "customer.update", "args": {"account_id": aid, "status": "closed"}},
    ]}
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    assert rep.replans_used == 1 and rep.plan_version == 2
    cur = await pg.execute(
        "SELECT archived, status FROM demo.customers WHERE account_id = %s", (aid,)
    )
    assert await cur.fetchone() == (True, "active")
    assert rep.status == "halted"
    assert rep.failure is not None and rep.failure.code == "authority_revoked"
