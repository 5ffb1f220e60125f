"""Seed 000's Saturday reconciliation against real S3 and Postgres."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from plangate.testing import running_worker, scheduled

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "saturday.json"


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def saturday(bucket: str, key: str, target: str, min_rows: int = 2) -> dict[str, Any]:
    return {
        "goal": "reconcile March vendor invoices",
        "budget": {"replans_max": 0},
        "steps": [
            {"n": 1, "tool": "s3.get", "effect": "read",
             "args": {"bucket": bucket, "key": key, "dest": f"sat/{target}.csv"},
             "binds": {"export_etag": "$.etag"}},
            {"n": 2, "tool": "warehouse.load", "depends_on": [1],
             "args": {"target": target, "source": f"sat/{target}.csv"},
             "post": [{"probe": "table_rowcount", "table": target, "min": min_rows}]},
        ],
    }


@pytest.fixture(scope="module")
def bucket(s3: Any) -> str:
    name = f"vendor-drops-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    return name


async def rows(pg: Any, table: str) -> int:
    cur = await pg.execute(f"SELECT count(*) FROM {table}")  # test's own literal name
    return int((await cur.fetchone())[0])


async def test_export_present_loads_the_rows(client, settings, s3, pg, bucket):
    key, target = "exp/present.csv", unique("staging.sat_present")
    s3.put_object(Bucket=bucket, Key=key, Body=b"id,amount\n1,10\n2,20\n3,30\n")
    async with running_worker(client, settings) as h:
        rep = await h.run(saturday(bucket, key, target))
    assert rep.status == "succeeded"
    assert await rows(pg, target) == 3
    # s3.get: a read before (the object, with the guards), then at the call and after it (the
    # file), in its activity; the load: a read before (skip?), its own, since it needs the
    # ETag the get binds; a read after, in its activity
    assert await scheduled(client, rep.run_id) == {
        "guard.resolve": 1, "probe.evaluate": 1, "s3.get": 1, "warehouse.load": 1}
    load = rep.step(2)
    assert [c.phase for c in load.checks] == ["skip+pre", "post"]
    mine, gets = load.checks[0].read_at, rep.step(1).checks[-1].read_at
    assert mine is not None and gets is not None and mine > gets  # read after the get's
    assert rep.completed[0].binds["export_etag"] == s3.head_object(Bucket=bucket, Key=key)["ETag"]


async def test_deleted_export_stops_before_the_load(client, settings, s3, pg, bucket):
    target = unique("staging.sat_deleted")
    s3.put_object(Bucket=bucket, Key="exp/deleted.csv", Body=b"id\n1\n")
    s3.delete_object(Bucket=bucket, Key="exp/deleted.csv")  # the lifecycle rule fires
    async with running_worker(client, settings) as h:
        rep = await h.run(saturday(bucket, "exp/deleted.csv", target))
    calls = await scheduled(client, rep.run_id)
    assert calls["s3.get"] == 0 and calls["warehouse.load"] == 0
    assert rep.status == "failed"
    assert rep.failure is not None and rep.failure.step == 1 and rep.failure.tool == "s3.get"
    assert "object_exists" in rep.failure.detail and rep.failure.retryable is False
    assert [s.state for s in rep.steps] == ["FAILED", "VOID"]
    cur = await pg.execute("SELECT to_regclass(%s)", (target,))
    assert (await cur.fetchone())[0] is None  # nothing was loaded, not even an empty table


async def test_empty_export_fails_the_post_check(client, settings, s3, pg, bucket):
    # A header and no lines: a legal load of zero rows that the tool reports as fine.
    target = unique("staging.sat_empty")
    s3.put_object(Bucket=bucket, Key="exp/empty.csv", Body=b"id,amount\n")
    async with running_worker(client, settings) as h:
        rep = await h.run(saturday(bucket, "exp/empty.csv", target))
    assert (await scheduled(client, rep.run_id))["warehouse.load"] == 1
    load = rep.step(2)
    assert load.result is not None  # the tool said "ok"
    assert (load.result["rows"], load.result["target"]) == (0, target)
    assert rep.status == "failed" and load.state == "FAILED"
    assert rep.failure is not None and rep.failure.step == 2
    assert rep.failure.code == "postcondition_unmet" and "table_rowcount" in rep.failure.detail
    assert rep.failure.attribution == "not_established"
    assert await rows(pg, target) == 0


async def test_min_rows_rolls_back_in_the_same_transaction(client, settings, s3, pg, bucket):
    target = unique("staging.sat_short")
    s3.put_object(Bucket=bucket, Key="exp/short.csv", Body=b"id\n1\n2\n")
    plan = saturday(bucket, "exp/short.csv", target)
    plan["steps"][1]["args"]["min_rows"] = 60000
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    assert rep.failure is not None and rep.failure.code == "too_few_rows"
    assert rep.step(2).attempts == 1  # permanent: never retried
    cur = await pg.execute("SELECT to_regclass(%s)", (target,))
    assert (await cur.fetchone())[0] is None  # rolled back, table creation included


async def test_the_examples_header_only_export_leaves_the_table_as_it_was(
    client, settings, s3, pg, bucket
):
    """examples/saturday.json as written (its bucket, table and file renamed): a header-only
    export is refused inside the load (``min_rows``), so the table keeps the rows it held; its
    post condition alone would judge the table only after the load had replaced them."""
    target, dest = unique("staging.sat_example"), f"work/{uuid.uuid4().hex[:8]}.csv"
    text = (EXAMPLE.read_text().replace('"vendor-drops"', json.dumps(bucket))
            .replace('"staging.vendor_invoice_202603"', json.dumps(target))
            .replace('"work/2026-03-invoice.csv"', json.dumps(dest)))
    plan = json.loads(text)
    key = plan["steps"][0]["args"]["key"]
    rows_ = "".join(f"INV-{i:04d},{i}.50\n" for i in range(614))
    s3.put_object(Bucket=bucket, Key=key, Body=("invoice_id,amount\n" + rows_).encode())
    async with running_worker(client, settings) as h:
        first = await h.run(plan)
        assert first.status == "succeeded" and await rows(pg, target) == 614
        s3.put_object(Bucket=bucket, Key=key, Body=b"invoice_id,amount\n")  # truncated
        second = await h.run(plan)
    assert second.failure is not None and second.failure.step == 2
    assert second.failure.code == "too_few_rows"
    assert await rows(pg, target) == 614  # the table as it was, not replaced by zero rows
