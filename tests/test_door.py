"""The door at the call (issue 46), tried as a stranger on the namespace tries it: a Temporal
client with the deployment's data converter and no plangate key of any kind, on a deployment
that lists its submitters and decides by Cedar policies. Genuine victims run first (a read-only
run, a run whose credit a person approved, a team's guarded workflows); the stranger reads
their histories and replays what they hold (the signed submission, the approval's grant, the
guard header, every header the server recorded) against every activity the workers register:

- started standalone, everything is refused ``not_permitted`` "outside a workflow" (but
  ``plangate.read_call``, the one activity that exists for standalone use);
- from the stranger's own workflow, under the id of a finished victim: an activity plangate
  only runs as a local activity is refused "local activity"; a tool, or a team's guarded
  activity, "seal" (no deployment's seal, or one made for another execution); the read call,
  "standalone";

and none of it leaves anything in the world: every plangate table, the demo systems', the
team's, the objects in the buckets involved and the work directory are as they were.
Real Temporal dev server (standalone activities on), Postgres and S3."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from credits import activities as team
from credits.workflows import ArchiveWorkflow, CreditWorkflow
from psycopg import sql
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import ActivityIDReusePolicy, RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from plangate.activities.bootstrap import OWN_TABLES, ensure_schema
from plangate.client.api import Plangate
from plangate.client.checked import check
from plangate.client.reading import read_call, read_id
from plangate.demo.schema import Account, seed_account
from plangate.records.interface import (
    CATALOGUE_ACTIVITY,
    PLAN_RUN,
    READ_CALL_ACTIVITY,
    REPLAN_WORKFLOW,
    TEAM_ACTIVITIES,
    WORKER_ACTIVITIES,
)
from plangate.records.proofs import Submitter
from plangate.records.reading import ReadAnswer, ReadCall
from plangate.records.signing import SigningKey
from plangate.temporal import PlangatePlugin
from plangate.temporal.calls import HEADER
from plangate.testing import running_worker
from plangate.worker.assembly import activities
from plangate.world.clients import World
from plangate.world.settings import Settings
from tests.attacker import (
    AttackWorkflow,
    ContinueWorkflow,
    CopiedHeaders,
    History,
    Outcome,
    captured,
    from_workflow,
    shot,
    standalone,
)
from tests.temporal_team import EXAMPLE, team_world

DEMO_TABLES = ("demo.customers", "demo.invoices", "demo.subscriptions", "demo.credits",
               "demo.outbox")
TEAM_TABLES = ("team.credits",)
PERMIT_ALL = '@id("base")\npermit(principal, action, resource);\n'
OUTSIDER = "attacker@outside.example"


@dataclass
class Deployment:
    """The deployment under attack and what its victims left in their histories."""

    client: Client
    settings: Settings  # the worker's: submitters listed, Cedar policies in force
    queue: str  # its catalogue's queue, where its worker polls
    names: list[str]  # every activity its worker registers, by name
    tag: str
    aid: str
    bucket: str
    read_victim: History  # a read-only run's
    paid_victim: History  # a run whose credit a person approved
    agent: SigningKey  # the victims' submitter (what a genuine client signs with)
    principal: str

    @property
    def workdir(self) -> Path:
        return self.settings.world.workdir


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def role(stack: Any, settings: Settings) -> AsyncIterator[str]:
    """A principal the victims act as (a Postgres role with what the demo tools need)."""
    name = f"door_{uuid.uuid4().hex[:8]}"
    w = World(settings.world)
    try:
        await ensure_schema(w, settings.catalogue)  # the demo systems' tables, to grant on
    finally:
        await w.close()
    r = sql.Identifier(name)
    async with await psycopg.AsyncConnection.connect(stack.database_url, autocommit=True) as pg:
        await pg.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(r))
        for grant in ("GRANT USAGE ON SCHEMA demo TO {}",
                      "GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA demo TO {}",
                      "GRANT USAGE ON ALL SEQUENCES IN SCHEMA demo TO {}",
                      "GRANT USAGE, CREATE ON SCHEMA public TO {}"):
            await pg.execute(sql.SQL(grant).format(r))
        yield name
        await pg.execute(sql.SQL("DROP OWNED BY {}").format(r))
        await pg.execute(sql.SQL("DROP ROLE {}").format(r))


def victim_plans(aid: str, principal: str) -> tuple[dict[str, Any], dict[str, Any]]:
    reads = {"goal": f"look at {aid}", "on_behalf_of": principal, "budget": {"replans_max": 0},
             "steps": [{"n": 1, "tool": "customer.get", "args": {"account_id": aid}},
                       {"n": 2, "tool": "billing.list_invoices", "args": {"account_id": aid}}]}
    paid = {"goal": f"credit {aid}", "on_behalf_of": principal, "budget": {"replans_max": 0},
            "steps": [{"n": 1, "tool": "billing.issue_credit", "approval": "required",
                       "args": {"account_id": aid, "amount_eur": 10.0}}]}
    return reads, paid


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def door(client: Client, settings: Settings, s3: Any, role: str,
               tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Deployment]:
    tag = uuid.uuid4().hex[:8]
    agent = SigningKey.generate("agent")
    policies = tmp_path_factory.mktemp("door-policies")
    (policies / "base.cedar").write_text(PERMIT_ALL)
    # receipts signed: a stranger's call must not get one made (plangate.receipts unchanged)
    deployed = replace(settings, policy=replace(
        settings.policy, policies=policies, receipt_key=SigningKey.generate("door-worker"),
        submitters=(Submitter(agent.name, agent.public, (role,)),)))
    aid, bucket = f"acct_{tag}", f"door-{tag}"
    world = World(deployed.world)
    try:
        await seed_account(world, Account(
            aid, f"ar@{aid}.example", status="closed",
            invoices=((f"in_{tag}", Decimal(50), "draft"),),
            subscriptions=((f"sub_{tag}", "active"),)))
    finally:
        await world.close()
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="figures.csv", Body=b"a,b\n1,2\n")
    async with running_worker(client, deployed) as h:
        workdir = h.settings.world.workdir
        (workdir / f"door-{tag}.csv").write_text("a,b\n1,2\n")
        api = Plangate(client, replace(h.settings, identity=replace(
            h.settings.identity, submitter_key=agent)))
        reads, paid = victim_plans(aid, role)
        reads_id = await api.start(reads)
        assert (await api.result(reads_id)).status == "succeeded"
        paid_id = await api.start(paid)
        card = await api.wait_for_card(paid_id, timeout=60)
        await api.approve(paid_id, card.step, card.digest, by="erin")
        assert (await api.result(paid_id)).status == "succeeded"
        w = World(h.settings.world)
        try:
            names = sorted(activities(w, h.settings))
        finally:
            await w.close()
        yield Deployment(client, h.settings, h.queue, names, tag, aid, bucket,
                         await captured(client, reads_id), await captured(client, paid_id),
                         agent, role)


async def world_now(stack: Any, s3: Any, buckets: tuple[str, ...], workdir: Path,
                    tables: tuple[str, ...]) -> dict[str, Any]:
    """Everything a call could have changed: each table's row count and a digest of its rows,
    the tables of ``public``, each bucket's objects, the work directory's files."""
    now: dict[str, Any] = {}
    async with await psycopg.AsyncConnection.connect(stack.database_url, autocommit=True) as pg:
        for t in tables:
            q = sql.SQL("SELECT count(*), md5(coalesce(string_agg(x::text, '|' ORDER BY "
                        "x::text), '')) FROM {} x").format(sql.Identifier(*t.split(".")))
            now[t] = tuple(await (await pg.execute(q)).fetchone() or ())
        cur = await pg.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                               "ORDER BY 1")
        now["public"] = [r[0] for r in await cur.fetchall()]
    for b in buckets:
        listed = s3.list_objects_v2(Bucket=b).get("Contents", [])
        now[f"s3://{b}"] = sorted((o["Key"], o["ETag"]) for o in listed)
    now["workdir"] = await asyncio.to_thread(files, workdir)
    return now


def files(workdir: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(workdir)), p.stat().st_size)
                  for p in workdir.rglob("*") if p.is_file())


def plangate_tables() -> tuple[str, ...]:
    return (*OWN_TABLES, *DEMO_TABLES)


def refused(outcomes: list[Outcome], because: str) -> list[str]:
    """Each outcome that is not the door's refusal naming ``because``, as it was."""
    return [o.said() for o in outcomes if not o.refused(because)]


def tools(d: Deployment) -> list[str]:
    return [n for n in d.names if n not in WORKER_ACTIVITIES and n != READ_CALL_ACTIVITY]


def attack_args(d: Deployment, tool: str) -> dict[str, Any]:
    """What the stranger asks ``tool`` to do: money out, mail to an outside address, records
    rewritten, objects planted, files written (any tool not named here gets a read's)."""
    t, aid = d.tag, d.aid
    return {
        "billing.cancel_subscription": {"sub_id": f"sub_{t}"},
        "billing.get_credit": {"idempotency_key": d.paid_victim.call(
            "billing.issue_credit").args[0]["idempotency_key"]},
        "billing.get_invoice": {"invoice_id": f"in_{t}"},
        "billing.get_subscription": {"sub_id": f"sub_{t}"},
        "billing.issue_credit": {"account_id": aid, "amount_eur": 99.0},
        "billing.list_invoices": {"account_id": aid},
        "billing.void_invoice": {"invoice_id": f"in_{t}"},
        "customer.get": {"account_id": aid},
        "customer.restore": {"account_id": aid},
        "customer.update": {"account_id": aid, "billing_contact": OUTSIDER},
        "email.get_message": {"message_id": f"msg_{t}"},
        "email.send": {"to": OUTSIDER, "template": "account_closed", "account_id": aid},
        "s3.get": {"bucket": d.bucket, "key": "figures.csv", "dest": f"door-{t}/got.csv"},
        "s3.put": {"bucket": d.bucket, "key": "planted.txt", "body": "the stranger's"},
        "warehouse.load": {"target": f"public.door_{t}", "source": f"door-{t}.csv"},
        "warehouse.run_sql": {"statement": "analyze", "params": {"table": "demo.customers"}},
    }.get(tool, {"account_id": aid})


def forged_call(d: Deployment, tool: str, n: int, run: str) -> dict[str, Any]:
    """The read-only victim's own call (its signed submission, principal and policy bundle),
    made a call of ``tool``: a key of run ``run``'s form, the stranger's arguments, no
    conditions to check."""
    call = dict(d.read_victim.call("customer.get").args[0])
    assert call.get("submission"), "the victim's call carries its submission"
    call["step"] = {**call["step"], "tool": tool, "n": n, "args": attack_args(d, tool)}
    call["idempotency_key"] = f"{run[:48]}~door/v1/{n}"
    call.pop("check", None)
    call.pop("after", None)
    return call


def worker_args(d: Deployment, name: str) -> list[Any]:
    """A local activity's input as the victim's workflow made it (the inputs themselves are
    not in the history: rebuilt from its start input and scheduled calls)."""
    v = d.read_victim
    run_input = v.input[0]
    call = v.call("customer.get").args[0]
    request = {"goal": run_input["plan"]["goal"], "completed": [], "remaining": [],
               "failure": {"step": 1, "tool": "customer.get", "plan_version": 1,
                           "code": "not_found", "retryable": False},
               "budget": {"replans_used": 0, "replans_max": 1}}
    return [{
        "guard.resolve": {"plan": run_input["plan"], "version": 1, "workflow_id": v.workflow_id,
                          "submission": run_input.get("submission")},
        "guard.approvers": {"workflow_id": v.workflow_id},
        # the victim's step, decided with arguments the stranger chose
        "guard.decide": {"workflow_id": v.workflow_id, "plan_version": 1, "step": 1,
                         "tool": "billing.issue_credit", "effect": "money",
                         "args": {"account_id": "acct_x", "amount_eur": 1}},
        # the victim's step, reading what the stranger wants read, as the worker's role
        "probe.evaluate": {"step": call["step"], "idempotency_key": call["idempotency_key"],
                           "conditions": [{"probe": "object_exists", "args": {
                               "bucket": d.bucket, "key": "figures.csv"}}]},
        "replanner.propose": request,
        "replanner.review": {"plan": run_input["plan"], "request": request},
        "windows.record": {"status": "succeeded", "calls": []},
        # the victim's row in the runs index, said to be succeeded
        "index.record": {"status": "succeeded", "goal": "x", "cards": [],
                         "started_at": "2026-01-01T00:00:00Z", "seq": 1 << 40},
        # a standing grant's use asked for a credit of the stranger's, under the victim's key
        "grant.cover": {"plan_version": 1, "step": 1, "tool": "billing.issue_credit",
                        "args": {"account_id": "acct_x", "amount_eur": 1},
                        "on_behalf_of": d.principal,
                        "idempotency_key": call["idempotency_key"]},
    }[name]]


async def test_every_plangate_activity_started_standalone_is_refused(
    door: Deployment, stack: Any, s3: Any
) -> None:
    d = door
    assert set(WORKER_ACTIVITIES) <= set(d.names) and READ_CALL_ACTIVITY in d.names
    # what plangate runs as local activities, by the victims' own histories
    assert set(d.read_victim.local) <= set(WORKER_ACTIVITIES), d.read_victim.local
    before = await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables())
    outcomes = []
    for n, tool in enumerate(tools(d), start=1):
        # under the victim's id, so its submission is "for this run", as the finding did
        outcomes.append(await standalone(
            d.client, tool, [forged_call(d, tool, n, "")], queue=d.queue,
            activity_id=d.read_victim.workflow_id))
    for name in WORKER_ACTIVITIES:
        outcomes.append(await standalone(
            d.client, name, worker_args(d, name), queue=d.queue,
            activity_id=f"{d.read_victim.workflow_id}-{name}"))
    # the approved credit, its grant and every header as the server recorded them
    paid = d.paid_victim.call("billing.issue_credit")
    outcomes.append(await standalone(d.client, paid.name, paid.args, queue=d.queue,
                                     activity_id=d.paid_victim.workflow_id,
                                     headers=paid.headers))
    # the catalogue's poller, on the deployment's own queue
    outcomes.append(await standalone(d.client, CATALOGUE_ACTIVITY, [],
                                     queue=d.settings.temporal.task_queue,
                                     activity_id=f"door-{d.tag}-catalogue"))
    assert len(outcomes) == len(d.names) + 1  # every name but the read call, the grant again
    assert not (bad := refused(outcomes, "outside a workflow")), "\n".join(bad)
    assert await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables()) == before


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stranger(client: Client) -> AsyncIterator[str]:
    """The stranger's own worker, on its own queue, running its ``AttackWorkflow``."""
    queue = f"stranger-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[AttackWorkflow],
                      interceptors=[CopiedHeaders()]):
        yield queue


async def test_a_local_activity_scheduled_by_a_strangers_workflow_is_refused(
    door: Deployment, stranger: str, stack: Any, s3: Any
) -> None:
    d = door
    before = await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables())
    shots = [shot(name, worker_args(d, name), d.queue) for name in WORKER_ACTIVITIES]
    outcomes = await from_workflow(d.client, stranger, d.read_victim.workflow_id, shots)
    assert len(outcomes) == len(WORKER_ACTIVITIES)
    assert not (bad := refused(outcomes, "local activity")), "\n".join(bad)
    assert await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables()) == before


async def test_a_tool_scheduled_by_a_strangers_workflow_with_a_victims_call_is_refused(
    door: Deployment, stranger: str, stack: Any, s3: Any
) -> None:
    d = door
    before = await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables())
    read, paid = d.read_victim, d.paid_victim
    # under the read-only victim's id: every tool, its submission, every header its call had
    headers = read.call("customer.get").headers
    shots = [shot(tool, [forged_call(d, tool, n, read.workflow_id)], d.queue, headers)
             for n, tool in enumerate(tools(d), start=1)]
    outcomes = await from_workflow(d.client, stranger, read.workflow_id, shots)
    # under the paid victim's id: its approved credit exactly as scheduled, and for 99 EUR
    credit = paid.call("billing.issue_credit")
    more = dict(credit.args[0], step={**credit.args[0]["step"], "args": attack_args(
        d, credit.name)}, idempotency_key=f"{paid.workflow_id[:48]}~door/v1/1")
    outcomes += await from_workflow(d.client, stranger, paid.workflow_id, [
        shot(credit.name, credit.args, d.queue, credit.headers),
        shot(credit.name, [more], d.queue, credit.headers)])
    assert len(outcomes) == len(tools(d)) + 2
    assert not (bad := refused(outcomes, "seal")), "\n".join(bad)
    assert await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables()) == before


async def test_the_read_call_scheduled_by_a_workflow_is_refused(
    door: Deployment, stranger: str, stack: Any, s3: Any
) -> None:
    d = door
    before = await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables())
    run_input = d.read_victim.input[0]
    one = {**run_input["plan"], "steps": run_input["plan"]["steps"][:1]}
    req = {"plan": one, "submission": run_input.get("submission")}
    (outcome,) = await from_workflow(d.client, stranger, d.read_victim.workflow_id,
                                     [shot(READ_CALL_ACTIVITY, [req], d.queue)])
    assert outcome.refused("standalone"), outcome.said()
    assert await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables()) == before


async def test_a_captured_submission_starts_no_second_run(
    door: Deployment, stack: Any, s3: Any
) -> None:
    """The read-only victim's own start, replayed as it is (its plan, its signed submission,
    within the submission's ten minutes) under its id once it ended: plangate's own workflow
    runs it, and its guard refuses it, the submission taken by the victim's run."""
    d = door
    before = await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables())
    victim = d.read_victim
    handle = await d.client.start_workflow(
        PLAN_RUN, victim.input[0], id=victim.workflow_id, task_queue=d.queue,
        execution_timeout=timedelta(seconds=60))
    api = Plangate(d.client, d.settings)
    rep = await api.result(victim.workflow_id)
    assert rep.status == "halted", rep.status
    assert rep.failure is not None and rep.failure.code == "not_permitted", rep.failure
    assert "already started run" in rep.failure.detail, rep.failure.detail
    assert handle.result_run_id  # a new execution, under the victim's id
    # no tool was scheduled by the replayed run
    replayed = await captured(d.client, victim.workflow_id)
    assert replayed.calls == [], [c.name for c in replayed.calls]
    after = await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables())
    # the refused run is a run: its end is kept for the report (one row in plangate.windows),
    # and the runs index shows it as Temporal does (the victim's id, its latest run: failed)
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"plangate.windows", "plangate.runs_index"}, changed
    assert after["plangate.windows"][0] == before["plangate.windows"][0] + 1


async def test_a_continuation_forged_from_a_strangers_workflow_starts_no_run(
    door: Deployment, stack: Any, s3: Any
) -> None:
    """The stranger's own workflow, under the read-only victim's id once it ended, continues as
    new into ``PlanRun`` on the deployment's queue with the victim's plan and submission and
    state of its own making (so Temporal says the run continued from another): the chain is the
    stranger's, the submission the victim's chain's, and nothing runs."""
    d = door
    before = await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables())
    victim = d.read_victim
    run_input = victim.input[0]
    made = run_input.get("plan_made_at") or "2026-01-01T00:00:00Z"
    carried = {"report": {"run_id": victim.workflow_id, "goal": run_input["plan"]["goal"]},
               "version": 1, "begun": False, "plan_made_at": made, "key_tag": "forged"}
    queue = f"stranger-cont-{d.tag}"
    async with Worker(d.client, task_queue=queue, workflows=[ContinueWorkflow]):
        await d.client.start_workflow(
            ContinueWorkflow.run, args=[PLAN_RUN, d.queue, {**run_input, "carried": carried}],
            id=victim.workflow_id, task_queue=queue, execution_timeout=timedelta(seconds=60))
        rep = await Plangate(d.client, d.settings).result(victim.workflow_id)
    assert rep.failure is not None and rep.failure.code == "not_permitted", rep.failure
    assert "already started run" in rep.failure.detail, rep.failure.detail
    assert (await captured(d.client, victim.workflow_id)).calls == []
    after = await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables())
    changed = {k for k in before if before[k] != after[k]}
    # the refused run's end, kept, and its row in the runs index
    assert changed <= {"plangate.windows", "plangate.runs_index"}, changed


async def test_a_captured_read_answers_nobody_again(door: Deployment, stack: Any,
                                                     s3: Any) -> None:
    """A genuine read over MCP's fast path (a standalone ``plangate.read_call``, its submission
    signed for its id), then the stranger: its input, as Temporal describes the activity to
    anyone on the namespace, started again under the same id once it closed. The submission
    answered one read: the second reads nothing and says why."""
    d = door
    signed = replace(d.settings, identity=replace(d.settings.identity, submitter_key=d.agent))
    plan = {"goal": f"look at {d.aid}", "on_behalf_of": d.principal,
            "budget": {"replans_max": 0},
            "steps": [{"n": 1, "tool": "customer.get", "effect": "read",
                       "args": {"account_id": d.aid}}]}
    rid = read_id("customer.get")
    genuine = await read_call(d.client, signed, check(plan, signed), rid,
                              take_within=timedelta(seconds=10), queue=d.queue)
    assert genuine.report is not None and genuine.report.steps[0].result is not None
    described = await d.client.get_activity_handle(rid).describe(include_input=True)
    assert described.raw_input is not None
    (captured_input,) = await d.client.data_converter.decode(described.raw_input.payloads,
                                                             [ReadCall])
    assert captured_input.submission is not None  # the victim's own, signed for this id
    before = await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables())
    again = await d.client.execute_activity(
        READ_CALL_ACTIVITY, captured_input, id=rid, task_queue=d.queue, result_type=ReadAnswer,
        schedule_to_close_timeout=timedelta(seconds=15),
        retry_policy=RetryPolicy(maximum_attempts=1),
        id_reuse_policy=ActivityIDReusePolicy.ALLOW_DUPLICATE)
    assert again.report is None, again.report
    assert again.run is not None and "already answered read" in again.run, again.run
    assert await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables()) == before


async def test_the_replan_workflow_started_by_a_stranger_asks_no_model(
    door: Deployment, stack: Any, s3: Any
) -> None:
    """``Replan`` runs only as the child of a plangate run: started by a stranger (the input a
    genuine re-plan would get), it fails before its first activity: no model is asked."""
    d = door
    before = await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables())
    wid = f"door-replan-{d.tag}"
    with pytest.raises(WorkflowFailureError) as caught:
        await d.client.execute_workflow(
            REPLAN_WORKFLOW, worker_args(d, "replanner.propose")[0], id=wid, task_queue=d.queue,
            execution_timeout=timedelta(seconds=60))
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "not_permitted", cause
    assert "started by no workflow" in cause.message and cause.non_retryable
    ran = await captured(d.client, wid)
    assert ran.local == [] and ran.calls == []  # neither the model nor the review was asked
    assert await world_now(stack, s3, (d.bucket,), d.workdir, plangate_tables()) == before


# -- the team's worker, with plangate.temporal's plugin --------------------------------------


@dataclass
class Team:
    client: Client  # the team's own (its converter), which the stranger uses too
    queue: str
    bucket: str
    archived: History  # a guarded write (its guard header)
    credited: History  # a guarded credit a person approved (the header carries the grant)


@pytest.fixture(scope="module")
def team_vars(stack: Any) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as m:
        for k, v in team_world(stack).items():
            m.setenv(k, v)
        yield


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def the_team(client: Client, settings: Settings, s3: Any,
                   team_vars: None) -> AsyncIterator[Team]:
    await team.ensure_schema()
    tc = await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace,
                              data_converter=pydantic_data_converter)
    tag = uuid.uuid4().hex[:8]
    queue, bucket = f"team-door-{tag}", f"team-door-{tag}"
    s3.create_bucket(Bucket=bucket)
    for key in ("a.csv", "b.csv"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"a,b\n")
    plugin = PlangatePlugin(EXAMPLE / "guards.yaml", settings=settings,
                            principal="support-agent")
    acts: list[Callable[..., Any]] = [team.issue_credit, team.find_credit, team.load_export,
                                      team.archive_object, team.count_rows]
    async with Worker(tc, task_queue=queue, workflows=[ArchiveWorkflow, CreditWorkflow],
                      activities=acts, plugins=[plugin]):
        archive_id, credit_id = f"archive-{tag}", f"credit-{tag}"
        await tc.execute_workflow(ArchiveWorkflow.run, args=[bucket, "a.csv"], id=archive_id,
                                  task_queue=queue, execution_timeout=timedelta(seconds=60))
        handle = await tc.start_workflow(
            CreditWorkflow.run, team.CreditRequest(account_id=f"acct-{tag}", amount_cents=500),
            id=credit_id, task_queue=queue, execution_timeout=timedelta(seconds=90))
        api = Plangate(client, settings)
        card = await api.wait_for_card(credit_id, timeout=60)
        await api.approve(credit_id, card.step, card.digest)
        await handle.result()
        yield Team(tc, queue, bucket, await captured(tc, archive_id),
                   await captured(tc, credit_id))


def team_tables() -> tuple[str, ...]:
    return (*OWN_TABLES, *TEAM_TABLES)


def other_object(args: list[Any]) -> list[Any]:
    """The archive's arguments, for the object the victim did not archive."""
    bucket, _ = args
    return [bucket, "b.csv"]


def with_key(headers: dict[str, Payload], key: str) -> dict[str, Payload]:
    """The captured guard header, its call's key replaced (a call of the stranger's own)."""
    forged = dict(headers)
    body = json.loads(headers[HEADER].data)
    forged[HEADER] = Payload(metadata=dict(headers[HEADER].metadata),
                             data=json.dumps({**body, "key": key}).encode())
    return forged


def team_local_args(t: Team, name: str) -> list[Any]:
    archive = t.archived.call("archive_object")
    key = json.loads(archive.headers[HEADER].data)["key"]
    step = {"run_id": t.archived.workflow_id, "plan_version": 1, "n": 1,
            "tool": "archive_object", "args": {"bucket": t.bucket, "key": "a.csv"}}
    return [{
        "plangate.guard.check": json.dumps({"workflow_id": t.archived.workflow_id,
                                            "activity": "archive_object", "n": 1,
                                            "values": archive.args, "key": key}),
        "plangate.guard.read": json.dumps({"step": step, "key": key, "conditions": [
            {"probe": "object_exists", "args": {"bucket": t.bucket, "key": "a.csv"}}]}),
        "plangate.guard.approvers": t.archived.workflow_id,
    }[name]]


async def test_the_plugins_activities_started_standalone_are_refused(
    the_team: Team, stack: Any, s3: Any, settings: Settings
) -> None:
    t = the_team
    assert set(t.archived.local) <= set(TEAM_ACTIVITIES), t.archived.local
    archive = t.archived.call("archive_object")
    credit = t.credited.call("issue_credit")
    assert HEADER in archive.headers and HEADER in credit.headers
    calls = dict(team.CALLS)
    before = await world_now(stack, s3, (t.bucket,), settings.world.workdir, team_tables())
    outcomes = [
        # the finding: the captured header, a key of the stranger's, another object
        await standalone(t.client, archive.name, other_object(archive.args), queue=t.queue,
                         activity_id=f"{t.archived.workflow_id}-again",
                         headers=with_key(archive.headers, "~door/g/1")),
        await standalone(t.client, archive.name, archive.args, queue=t.queue,
                         activity_id=t.archived.workflow_id, headers=archive.headers),
        await standalone(t.client, credit.name, credit.args, queue=t.queue,
                         activity_id=t.credited.workflow_id, headers=credit.headers),
        await standalone(t.client, "load_export", [{"bucket": t.bucket, "key": "planted.txt",
                                                    "rows": 3}],
                         queue=t.queue, activity_id=f"{t.archived.workflow_id}-export",
                         headers=with_key(archive.headers, "~door/g/2")),
    ]
    for name in TEAM_ACTIVITIES:
        outcomes.append(await standalone(t.client, name, team_local_args(t, name),
                                         queue=t.queue,
                                         activity_id=f"{t.archived.workflow_id}-{name}"))
    assert not (bad := refused(outcomes, "outside a workflow")), "\n".join(bad)
    assert dict(team.CALLS) == calls
    assert await world_now(stack, s3, (t.bucket,), settings.world.workdir,
                           team_tables()) == before


async def test_a_strangers_workflow_with_a_captured_guard_header_is_refused(
    the_team: Team, stack: Any, s3: Any, settings: Settings
) -> None:
    t = the_team
    archive = t.archived.call("archive_object")
    credit = t.credited.call("issue_credit")
    queue = f"stranger-team-{uuid.uuid4().hex[:8]}"
    calls = dict(team.CALLS)
    before = await world_now(stack, s3, (t.bucket,), settings.world.workdir, team_tables())
    wid = t.archived.workflow_id
    async with Worker(t.client, task_queue=queue, workflows=[AttackWorkflow],
                      interceptors=[CopiedHeaders()]):
        guarded = await from_workflow(t.client, queue, wid, [
            shot(archive.name, archive.args, t.queue, archive.headers),
            shot(archive.name, other_object(archive.args), t.queue,
                 with_key(archive.headers, f"{wid[:48]}~door/g/1")),
        ])
        guarded += await from_workflow(t.client, queue, t.credited.workflow_id, [
            shot(credit.name, credit.args, t.queue, credit.headers)])
        local = await from_workflow(t.client, queue, wid, [
            shot(name, team_local_args(t, name), t.queue) for name in TEAM_ACTIVITIES])
    bad = refused(guarded, "seal") + refused(local, "local activity")
    assert not bad, "\n".join(bad)
    assert dict(team.CALLS) == calls
    assert await world_now(stack, s3, (t.bucket,), settings.world.workdir,
                           team_tables()) == before
