"""`plangate run --wait --json` and `plangate status --json` against a worker; conditional
S3 writes carrying the ETag a step observed."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from plangate.cli import main
from plangate.testing import running_worker, scheduled


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def bucket(s3):
    name = unique("cli-drops")
    s3.create_bucket(Bucket=name)
    return name


def put_plan(bucket: str, key: str, **put_args: str) -> dict[str, Any]:
    return {"goal": "replace a report", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": bucket, "key": key, "dest": f"cli/{key}"},
         "binds": {"etag": "$.etag"}},
        {"n": 2, "tool": "s3.put", "depends_on": [1],
         "args": {"bucket": bucket, "key": key, "body": "v2", **put_args}},
    ]}


async def test_run_and_status_as_json(client, settings, stack, bucket, s3, tmp_path,
                                      monkeypatch, capsys):
    key, run_id = unique("a") + ".txt", unique("cli-ok")
    s3.put_object(Bucket=bucket, Key=key, Body=b"v1")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(put_plan(bucket, key, if_match="${etag}")))
    async with running_worker(client, settings) as h:
        for k, v in {**stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue,
                     "PLANGATE_WORKDIR": str(settings.world.workdir)}.items():
            monkeypatch.setenv(k, v)
        code = await asyncio.to_thread(main, ["run", str(path), "--id", run_id, "--wait",
                                              "--json"])
        report = json.loads(capsys.readouterr().out)
        assert code == 0 and report["status"] == "succeeded" and report["run_id"] == run_id
        assert await asyncio.to_thread(main, ["status", run_id, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["steps"][1]["state"] == "DONE"
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"v2"


async def test_a_write_carrying_a_stale_version_is_refused(client, settings, bucket, s3):
    key = unique("b") + ".txt"
    s3.put_object(Bucket=bucket, Key=key, Body=b"v1")
    async with running_worker(client, settings) as h:
        # the object moves after the plan's read: If-Match carries the ETag step 1 saw
        plan = put_plan(bucket, key, if_match='"0123456789abcdef0123456789abcdef"')
        rep = await h.run(plan)
        create_only = await h.run(put_plan(bucket, key, if_none_match="*"))
    for r in (rep, create_only):
        # S3 refuses with 412: the step reads the world again (re-evaluate), then the run has
        # no re-plan left: failed, never a blind second write
        assert r.status == "failed"
        assert r.failure is not None and r.failure.code == "precondition_failed"
        assert r.failure.status == 412 and r.step(2).attempts == 1
        assert [c.phase for c in r.step(2).checks][-1] == "re-evaluate"
        assert r.metrics.answers_412 == 1
        assert (await scheduled(client, r.run_id))["s3.put"] == 1
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"v1"


async def test_a_failed_run_exits_1_with_its_report(client, settings, stack, bucket, s3,
                                                    tmp_path, monkeypatch, capsys):
    # Exit 1 alone is also what any crash gives (main turns an exception into 1): the run's
    # own summary on stdout, nothing on stderr, and the history say it was the run that failed.
    key, run_id = unique("missing") + ".txt", unique("cli-fails")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(put_plan(bucket, key)))
    async with running_worker(client, settings) as h:
        for k, v in {**stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue}.items():
            monkeypatch.setenv(k, v)
        code = await asyncio.to_thread(main, ["run", str(path), "--wait", "--id", run_id])
    out, err = capsys.readouterr()
    assert code == 1
    assert err == ""
    # stdout is no terminal: a plain line per change as the run went, then its summary
    *changes, run, step_1, step_2, failure = out.splitlines()
    assert any(" v1 step 1 s3.get: FAILED " in line for line in changes), changes
    assert run == f"run {run_id}: failed (plan version 1)"
    # the plan allows no re-plan: the step says so, not that one is coming (issue 38's defect)
    assert step_1 == ("  v1 step 1 s3.get: FAILED [failed (precondition_unmet); not re-planned: "
                      "the plan allows none (budget.replans_max 0)]")
    assert step_2 == "  v1 step 2 s3.put: VOID"
    assert failure == (
        f"  failure: step 1 s3.get precondition_unmet (retryable: false) object_exists(bucket="
        f"'{bucket}',key='{key}'): s3://{bucket}/{key} does not exist"
    )
    calls = await scheduled(client, run_id)
    # the guards derived and the pre check read with them, in one local activity; it failed:
    # neither tool ran
    assert calls == {"guard.resolve": 1}
