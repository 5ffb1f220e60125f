"""`plangate run --wait --json` and `plangate status --json` against a worker; conditional
S3 writes carrying the ETag a step observed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from plangate.cli import main
from tests.harness import running_worker, scheduled

BUCKET = "cli-drops"


@pytest.fixture(scope="module")
def bucket(s3):
    s3.create_bucket(Bucket=BUCKET)
    return BUCKET


def put_plan(key: str, **put_args: str) -> dict[str, Any]:
    return {"goal": "replace a report", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": BUCKET, "key": key, "dest": f"cli/{key}"},
         "binds": {"etag": "$.etag"}},
        {"n": 2, "tool": "s3.put", "depends_on": [1],
         "args": {"bucket": BUCKET, "key": key, "body": "v2", **put_args}},
    ]}



async def test_run_and_status_as_json(client, settings, stack, bucket, s3, tmp_path,
                                      monkeypatch, capsys):
    s3.put_object(Bucket=bucket, Key="a.txt", Body=b"v1")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(put_plan("a.txt", if_match="${etag}")))
    async with running_worker(client, settings) as h:
        for k, v in {**stack.env(), "PLANGATE_TASK_QUEUE": h.settings.task_queue,
                     "PLANGATE_WORKDIR": str(settings.workdir)}.items():
            monkeypatch.setenv(k, v)
        code = await asyncio.to_thread(main, ["run", str(path), "--id", "cli-ok", "--wait",
                                              "--json"])
        report = json.loads(capsys.readouterr().out)
        assert code == 0 and report["status"] == "succeeded" and report["run_id"] == "cli-ok"
        assert await asyncio.to_thread(main, ["status", "cli-ok", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["steps"][1]["state"] == "DONE"
    assert s3.get_object(Bucket=bucket, Key="a.txt")["Body"].read() == b"v2"


async def test_a_write_carrying_a_stale_version_is_refused(client, settings, bucket, s3):
    s3.put_object(Bucket=bucket, Key="b.txt", Body=b"v1")
    async with running_worker(client, settings) as h:
        # the object moves after the plan's read: If-Match carries the ETag step 1 saw
        plan = put_plan("b.txt", if_match='"0123456789abcdef0123456789abcdef"')
        rep = await h.run(plan)
        create_only = await h.run(put_plan("b.txt", if_none_match="*"))
    for r in (rep, create_only):
        assert r.status == "failed"
        assert r.failure is not None and r.failure.code == "resource_moved"
        assert r.failure.status == 409 and r.step(2).attempts == 1
        assert (await scheduled(client, r.run_id))["s3.put"] == 1
    assert s3.get_object(Bucket=bucket, Key="b.txt")["Body"].read() == b"v1"


async def test_a_failed_run_exits_1(client, settings, stack, bucket, tmp_path, monkeypatch):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(put_plan("missing.txt")))
    async with running_worker(client, settings) as h:
        for k, v in {**stack.env(), "PLANGATE_TASK_QUEUE": h.settings.task_queue}.items():
            monkeypatch.setenv(k, v)
        assert await asyncio.to_thread(main, ["run", str(path), "--wait"]) == 1
