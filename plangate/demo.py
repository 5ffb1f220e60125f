"""``plangate demo``: seed 000's Saturday reconciliation replayed against real services.

Starts the embedded stack and a worker in this process, runs the same two-step plan against
three states of the bucket, and prints what happened to the world after each.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import psycopg
from temporalio.worker import Worker

from activities.bootstrap import ensure_schema
from activities.world import World
from plangate import runs
from plangate.checking import check
from plangate.settings import Settings
from plangate.worker_factory import WORKFLOWS, activities_for, connect
from plans.load import parse_plan
from workflows.report import RunReport

BUCKET = "vendor-drops"
KEY = "vendor/exports/2026-03-invoice.csv"


def saturday_plan(target: str) -> dict[str, Any]:
    return {
        "goal": "reconcile March vendor invoices",
        "budget": {"replans_max": 0},
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
                "depends_on": [1],
                "args": {"target": target, "source": f"work/{target}.csv"},
                "post": [{"probe": "table_rowcount", "table": target, "min": 600}],
            },
        ],
    }


def invoice_csv(lines: int) -> bytes:
    rows = [f"INV-{i:05d},{(i * 37) % 1000}.{i % 100:02d}" for i in range(lines)]
    return ("invoice_id,amount_eur\n" + "\n".join(rows) + ("\n" if rows else "")).encode()


async def _rows(url: str, table: str) -> str:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute("SELECT to_regclass(%s)::text", (table,))
        if (await cur.fetchone() or [None])[0] is None:
            return "table does not exist"
        from activities.pg import ident

        cur = await conn.execute(psycopg.sql.SQL("SELECT count(*) FROM {}").format(ident(table)))
        return f"{(await cur.fetchone() or [0])[0]} rows"


def _print(title: str, rep: RunReport, world: str) -> None:
    print(f"\n== {title}")
    for s in rep.steps:
        why = f"  ({s.answer}: {s.reason})" if s.answer else ""
        print(f"   step {s.n} {s.tool:<15} {s.state.value:<10} calls={s.attempts}{why}")
    if rep.failure:
        print(f"   failure: step {rep.failure.step} {rep.failure.code}: {rep.failure.detail}")
    print(f"   run: {rep.status.value}; world: {world}")


async def run_demo(state_dir: Path) -> int:
    from plangate.stack import EmbeddedStack

    await asyncio.to_thread(state_dir.mkdir, parents=True, exist_ok=True)
    # Failed activities are part of the story here; the report says what failed and why.
    logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(dir=state_dir) as tmp:
        async with EmbeddedStack(tmp, ui=False) as stack:
            env = stack.env()
            os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
            settings = replace(Settings.from_env(env), task_queue=f"demo-{uuid.uuid4().hex[:6]}")
            s3 = boto3.client(
                "s3",
                endpoint_url=stack.s3_endpoint_url,
                aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                region_name=env["AWS_DEFAULT_REGION"],
            )
            s3.create_bucket(Bucket=BUCKET)
            world = World(settings)
            await ensure_schema(world)
            client = await connect(settings)
            print("plangate demo: Saturday reconciliation (seed 000) on real S3 and Postgres")
            async with Worker(
                client,
                task_queue=settings.task_queue,
                workflows=WORKFLOWS,
                activities=activities_for(world),
            ):
                cases = [
                    ("export present (614 lines)", invoice_csv(614), "staging.inv_present"),
                    (
                        "export deleted by a lifecycle rule before the run",
                        None,
                        "staging.inv_deleted",
                    ),
                    (
                        "export truncated to its header: a legal load of zero rows",
                        invoice_csv(0),
                        "staging.inv_empty",
                    ),
                ]
                ok = True
                for title, body, target in cases:
                    if body is None:
                        s3.delete_object(Bucket=BUCKET, Key=KEY)
                    else:
                        s3.put_object(Bucket=BUCKET, Key=KEY, Body=body)
                    p = check(parse_plan(saturday_plan(target)), settings.workdir)
                    rep = await (await runs.start(client, settings, p)).result()
                    _print(title, rep, await _rows(stack.database_url, target))
                    ok = ok and (rep.status == "succeeded") == (target == "staging.inv_present")
            await world.close()
    print("\nplangate demo: " + ("every outcome as expected" if ok else "UNEXPECTED outcome"))
    return 0 if ok else 1
