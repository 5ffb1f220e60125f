"""Skips are earned: a step is skipped as already done only on evidence of *this* call's effect.
Seed 000's Saturday failure must not come back through the guard itself: a staging table still
holding last month's rows is never this month's load already done."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from plangate.demo.replay import invoice_csv
from plangate.testing import running_worker, scheduled


@pytest.fixture(scope="module")
def bucket(s3: Any) -> str:
    name = f"skip-drops-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    return name


def monthly(bucket: str, key: str, target: str) -> dict[str, Any]:
    return {"goal": "load this month's export", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": bucket, "key": key, "dest": f"skips/{target}.csv"}},
        {"n": 2, "tool": "warehouse.load", "depends_on": [1],
         "args": {"target": target, "source": f"skips/{target}.csv"}},
    ]}


def month_csv(prefix: str, lines: int) -> bytes:
    return invoice_csv(lines).replace(b"INV-", prefix.encode() + b"-")


async def table(pg: Any, name: str) -> tuple[int, set[str]]:
    cur = await pg.execute(f"SELECT invoice_id FROM {name}")  # the test's own literal name
    ids = {r[0] for r in await cur.fetchall()}
    return len(ids), {i.split("-")[0] for i in ids}


async def test_last_months_rows_never_make_this_months_load_skip(
    client, settings, s3, pg, bucket
):
    target = f"staging.stale_{uuid.uuid4().hex[:8]}"
    async with running_worker(client, settings) as h:
        s3.put_object(Bucket=bucket, Key="feb.csv", Body=month_csv("FEB", 500))
        february = await h.run(monthly(bucket, "feb.csv", target))
        assert february.status == "succeeded" and await table(pg, target) == (500, {"FEB"})

        s3.put_object(Bucket=bucket, Key="mar.csv", Body=month_csv("MAR", 700))
        march = await h.run(monthly(bucket, "mar.csv", target))
    assert march.status == "succeeded"
    assert march.step(2).state == "DONE" and march.step(2).answer is None
    assert (await scheduled(client, march.run_id))["warehouse.load"] == 1
    assert await table(pg, target) == (700, {"MAR"})  # exactly this month's rows


async def test_rows_loaded_outside_plangate_are_not_this_load(client, settings, s3, pg, bucket):
    target = f"staging.outside_{uuid.uuid4().hex[:8]}"
    await pg.execute(f"CREATE TABLE {target} (invoice_id text, amount_eur text)")
    await pg.execute(
        f"INSERT INTO {target} SELECT 'OLD-' || g, '1.00' FROM generate_series(1, 500) g"
    )
    s3.put_object(Bucket=bucket, Key="apr.csv", Body=month_csv("APR", 700))
    async with running_worker(client, settings) as h:
        rep = await h.run(monthly(bucket, "apr.csv", target))
    assert rep.step(2).state == "DONE"
    assert (await scheduled(client, rep.run_id))["warehouse.load"] == 1
    assert await table(pg, target) == (700, {"APR"})


async def test_a_resumed_load_of_the_same_content_is_skipped(client, settings, s3, pg, bucket):
    target = f"staging.resume_{uuid.uuid4().hex[:8]}"
    s3.put_object(Bucket=bucket, Key="may.csv", Body=month_csv("MAY", 300))
    async with running_worker(client, settings) as h:
        first = await h.run(monthly(bucket, "may.csv", target))
        again = await h.run(monthly(bucket, "may.csv", target))
        # someone deletes a row after the load: the table no longer holds what was loaded
        await pg.execute(f"DELETE FROM {target} WHERE invoice_id = 'MAY-00007'")
        third = await h.run(monthly(bucket, "may.csv", target))
    assert first.step(2).state == "DONE"
    assert again.step(2).state == "SKIPPED" and again.step(2).attempts == 0
    assert (await scheduled(client, again.run_id))["warehouse.load"] == 0
    assert third.step(2).state == "DONE"
    assert (await scheduled(client, third.run_id))["warehouse.load"] == 1
    assert await table(pg, target) == (300, {"MAY"})


async def test_a_statement_with_no_evidence_is_never_skipped(client, settings, pg):
    # create_index's post (index_valid) holds for an older index of the same name too
    tag = uuid.uuid4().hex[:8]
    await pg.execute(f"CREATE TABLE idx_{tag} (a int, b int)")
    await pg.execute(f"CREATE INDEX ix_{tag} ON idx_{tag} (a)")
    plan = {"goal": "index b", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "create_index",
                  "params": {"name": f"ix_{tag}", "table": f"idx_{tag}", "column": "b"}}},
    ]}
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    assert rep.step(1).state == "DONE" and rep.step(1).answer is None
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == 1
