"""``plangate demo``: the seeds' two incidents replayed against real services, each once as the
naive executor went and once as plangate goes, with what happened to the world after each.

Starts the embedded stack and a worker (playbook re-planner, the demo systems on) in this
process.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import psycopg
from temporalio.client import Client

from plangate.activities.bootstrap import ensure_schema
from plangate.activities.catalogue import check_plan
from plangate.activities.extensions import registry_for
from plangate.client.api import Plangate
from plangate.client.connection import connect
from plangate.demo.naive import run_naive
from plangate.demo.scenarios import closeout_facts, closeout_plan
from plangate.demo.schema import seed_acct_3319f
from plangate.plans.load import parse_plan
from plangate.plans.visible import visible
from plangate.records.approvals import CardStatus
from plangate.records.report import RunReport
from plangate.records.signing import SigningKey
from plangate.worker.assembly import build_worker
from plangate.world.clients import World
from plangate.world.pg import ident
from plangate.world.settings import Settings

BUCKET = "vendor-drops"
KEY = "vendor/exports/2026-03-invoice.csv"


def saturday_plan(target: str) -> dict[str, Any]:
    """examples/saturday.json (the README's first plan) with its table ``target``: the demo
    ends as ``plangate run`` of that plan ends, in the same words."""
    return {
        "goal": "reconcile March vendor invoices",
        "budget": {"replans_max": 2},
        "steps": [
            {
                "n": 1,
                "tool": "s3.get",
                "effect": "read",
                "args": {"bucket": BUCKET, "key": KEY, "dest": f"work/{target}.csv"},
                "binds": {"export_etag": "$.etag"},
            },
            {
                "n": 2,
                "tool": "warehouse.load",
                "effect": "write",
                "depends_on": [1],
                "args": {"target": target, "source": f"work/{target}.csv", "min_rows": 600},
                "pre": [{"probe": "object_exists", "bucket": BUCKET, "key": KEY}],
                "post": [{"probe": "table_rowcount", "table": target, "min": 600}],
                "on_unmet": "replan",
            },
        ],
    }


def invoice_csv(lines: int) -> bytes:
    rows = [f"INV-{i:05d},{(i * 37) % 1000}.{i % 100:02d}" for i in range(lines)]
    return ("invoice_id,amount_eur\n" + "\n".join(rows) + ("\n" if rows else "")).encode()


class Demo:
    def __init__(self, client: Client, settings: Settings, world: World, s3: Any) -> None:
        self.client, self.settings, self.world, self.s3 = client, settings, world, s3
        self.tools = registry_for(settings.catalogue).tools
        self.ok = True

    async def run(self, body: dict[str, Any]) -> RunReport:
        """The plan, run to its end; each card it waits on answered by the demo's operator
        (a money or external step waits for a person, as on any deployment that says nothing
        else; a re-planned one always does)."""
        p = check_plan(parse_plan(body), self.settings.catalogue, self.settings.world)
        api = Plangate(self.client, self.settings)
        run_id = await api.start(p)
        answered: set[str] = set()
        async for rep in api.poll(run_id, every_s=0.2):
            for a in rep.approvals:
                if a.status is CardStatus.PENDING and a.digest not in answered:
                    answered.add(a.digest)
                    c = a.card
                    args = ", ".join(f"{k}={v!r}" for k, v in c.args.items())
                    print(visible(
                        f"   card: v{a.plan_version} step {a.step} will call {c.tool}({args}) "
                        f"[{c.effect}]: waits for a person; digest {a.digest[:12]}..., "
                        f"approved by {api.approver_key().name}"
                    ))
                    await api.approve(run_id, a.step, a.digest)
            last = rep
        return last

    async def rows(self, table: str) -> str:
        async with await psycopg.AsyncConnection.connect(
            self.settings.world.database_url, autocommit=True
        ) as conn:
            cur = await conn.execute("SELECT to_regclass(%s)::text", (table,))
            if (await cur.fetchone() or [None])[0] is None:
                return "no table"
            q = psycopg.sql.SQL("SELECT count(*) FROM {}").format(ident(table))
            cur = await conn.execute(q)
            return f"{(await cur.fetchone() or [0])[0]} rows in {table}"

    async def closeout_world(self) -> str:
        async with await psycopg.AsyncConnection.connect(
            self.settings.world.database_url, autocommit=True
        ) as conn:
            f = await closeout_facts(conn)
        status, archived, contact = f["customer"]
        return (
            f"customer {status}{' (archived)' if archived else ''}, contact {contact}; "
            f"invoices {f['invoices']}; subscription {f['subscriptions']}; "
            f"credits {f['credits']}; emails {f['emails']}"
        )

    def expect(self, what: bool) -> None:
        self.ok = self.ok and what

    async def saturday(self) -> None:
        print("\n#### Incident 1: the Saturday reconciliation")
        self.s3.put_object(Bucket=BUCKET, Key=KEY, Body=invoice_csv(0))
        plan = saturday_plan("staging.naive_inv")
        del plan["steps"][1]["args"]["min_rows"]  # as the incident's plan was: the load unguarded
        naive = await run_naive(parse_plan(plan), self.world, self.tools)
        heading("naive executor, export truncated to its header")
        for line in naive.lines:
            print(visible(f"   {line}"))
        print(f"   run: {naive.verdict}; world: {await self.rows('staging.naive_inv')}")
        cases = [
            ("export present (614 lines)", invoice_csv(614), "staging.inv_present", True),
            ("export deleted by a lifecycle rule", None, "staging.inv_deleted", False),
            ("export truncated to its header", invoice_csv(0), "staging.inv_empty", False),
        ]
        for title, body, target, should_succeed in cases:
            if body is None:
                self.s3.delete_object(Bucket=BUCKET, Key=KEY)
            else:
                self.s3.put_object(Bucket=BUCKET, Key=KEY, Body=body)
            heading(f"plangate, {title}")  # before the run: the cards it prints belong here
            rep = await self.run(saturday_plan(target))
            show(rep, await self.rows(target))
            self.expect((rep.status == "succeeded") == should_succeed)

    async def closeout(self) -> None:
        print("\n#### Incident 2: closing out acct_3319f, archived at 02:14")
        await seed_acct_3319f(self.world)
        naive = await run_naive(parse_plan(closeout_plan()), self.world, self.tools)
        heading("naive executor")
        for line in naive.lines:
            print(visible(f"   {line}"))
        print(f"   run: {naive.verdict}\n   world: {await self.closeout_world()}")
        await seed_acct_3319f(self.world)
        heading("plangate (playbook re-planner)")
        rep = await self.run(closeout_plan())
        show(rep, await self.closeout_world())
        self.expect(rep.status == "succeeded")


def heading(title: str) -> None:
    """A case's heading, printed before the case runs: what it prints (a card answered) is
    under it, not under the case before."""
    print(f"\n== {title}", flush=True)


def show(rep: RunReport, world: str) -> None:
    """How a case's run ended, under its heading: each step, the failure, the re-plans."""
    for s in rep.steps:
        why = f"  ({s.answer}: {s.reason})" if s.answer else ""
        print(visible(
            f"   v{s.plan_version} step {s.n} {s.tool:<27} {s.state.value:<10} "
            f"calls={s.attempts}{why}"
        ))
    if rep.failure:
        f = rep.failure
        print(visible(f"   failure: step {f.step} {f.code}: {f.detail}"))
    for r in rep.replans:
        print(visible(
            f"   replan {r.attempt} ({r.backend}): {'accepted' if r.accepted else 'refused'}"
            f" - {r.reason}"
        ))
    print(f"   run: {rep.status.value}\n   world: {world}")


async def run_demo(state_dir: Path) -> int:
    from plangate.dev.stack import EmbeddedStack, environment

    await asyncio.to_thread(state_dir.mkdir, parents=True, exist_ok=True)
    # Failed activities are part of the story here; the report says what failed and why.
    logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(dir=state_dir) as tmp:
        async with EmbeddedStack(tmp, ui=False) as stack:
            env = stack.env()
            aws = {k: v for k, v in env.items() if k.startswith("AWS_")}
            with environment(aws):  # this process's boto3 clients sign with the stack's keys
                demo = await _replay(env)
    print("\nplangate demo: " + ("every outcome as expected" if demo.ok else "UNEXPECTED outcome"))
    return 0 if demo.ok else 1


async def _replay(env: dict[str, str]) -> Demo:
    """Both incidents on the stack ``env`` points at, with a worker of this process."""
    # the person who answers the demo's cards: a key of its own, known to its worker
    operator = SigningKey.generate("operator")
    s = Settings.from_env(env)
    settings = replace(
        s,
        temporal=replace(s.temporal, task_queue=f"demo-{uuid.uuid4().hex[:6]}"),
        model=replace(s.model, replanner="playbook"),
        catalogue=replace(s.catalogue, demo_systems=True),
        policy=replace(s.policy, approvers=((operator.name, operator.public),)),
        identity=replace(s.identity, approver_keys=(operator,)),
    )
    s3 = boto3.client("s3", endpoint_url=settings.world.s3_endpoint_url)
    s3.create_bucket(Bucket=BUCKET)
    world = World(settings.world)
    await ensure_schema(world, settings.catalogue)
    client = await connect(settings)
    demo = Demo(client, settings, world, s3)
    print("plangate demo: two incidents of agent plans, replayed on real S3, Postgres and Temporal")
    print(f"plangate demo: {settings.policy.approval_rule()}; the demo's operator answers "
          "each card it prints")
    async with await build_worker(client, settings, world):
        await demo.saturday()
        await demo.closeout()
    await world.close()
    return demo
