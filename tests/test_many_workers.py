"""Steps on any worker (``world.files``): three workers that share no disk, each with its own
work directory, run a plan whose files pass from step to step; the files live in the run's
artifact prefix in the object store (``PLANGATE_ARTIFACTS``)."""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from plangate.activities.bootstrap import ensure_schema
from plangate.client.connection import connect
from plangate.testing import Harness, history_events
from plangate.worker.assembly import build_worker
from plangate.world.clients import World
from plangate.world.scopes import run_scope
from plangate.world.settings import Settings

PAIRS = 10


def plan(bucket: str, tag: str) -> dict[str, Any]:
    """Ten independent get-then-load pairs: 20 steps, each load reading its get's file."""
    steps: list[dict[str, Any]] = []
    for k in range(1, PAIRS + 1):
        steps += [
            {"n": 2 * k - 1, "tool": "s3.get", "effect": "read",
             "args": {"bucket": bucket, "key": f"drop/{k}.csv", "dest": f"in/{k}.csv"}},
            {"n": 2 * k, "tool": "warehouse.load", "depends_on": [2 * k - 1],
             "args": {"target": f"staging.{tag}_{k}", "source": f"in/{k}.csv"},
             "post": [{"probe": "table_rowcount", "table": f"staging.{tag}_{k}", "min": k}]},
        ]
    return {"goal": "load ten vendor drops", "budget": {"replans_max": 0}, "steps": steps}


async def test_a_file_passing_plan_runs_on_three_workers_that_share_no_disk(
    client, settings, s3, pg, tmp_path: Path
):
    bucket, artifacts, tag = (f"{p}-{uuid.uuid4().hex[:8]}" for p in ("drops", "art", "t"))
    tag = tag.replace("-", "_")
    for b in (bucket, artifacts):
        s3.create_bucket(Bucket=b)
    for k in range(1, PAIRS + 1):
        body = "id,amount\n" + "".join(f"{i},{i * 10}\n" for i in range(k))
        s3.put_object(Bucket=bucket, Key=f"drop/{k}.csv", Body=body.encode())
    queue = f"test-{uuid.uuid4().hex[:8]}"
    shared = replace(settings, temporal=replace(settings.temporal, task_queue=queue),
                     world=replace(settings.world, artifacts_bucket=artifacts))
    workdirs = [tmp_path / f"worker{i}" for i in range(3)]
    worlds = [World(replace(shared.world, workdir=w)) for w in workdirs]
    await ensure_schema(worlds[0], shared.catalogue)
    async with contextlib.AsyncExitStack() as stack:
        for i, w in enumerate(worlds):
            # a client each, as separate machines have (the SDK allows one worker per queue
            # on a client)
            own = await connect(shared)
            worker = await build_worker(own, shared, w, identity=f"worker-{i}")
            await stack.enter_async_context(worker)
        rep = await Harness(client, shared).run(plan(bucket, tag))
    for w in worlds:
        await w.close()

    assert rep.status == "succeeded", [(s.n, s.reason) for s in rep.steps if s.state != "DONE"]
    assert [s.state for s in rep.steps] == ["DONE"] * 2 * PAIRS
    for k in range(1, PAIRS + 1):
        cur = await pg.execute(f"SELECT count(*) FROM staging.{tag}_{k}")  # the test's own name
        assert (await cur.fetchone())[0] == k
    # the files are the run's artifacts, in the object store under the run's own scope (its
    # workflow id and chain, world.scopes); no worker's disk kept one
    events = await history_events(client, rep.run_id)
    first = events[0].workflow_execution_started_event_attributes.first_execution_run_id
    chain = hashlib.sha256(f"{rep.run_id}/{first}".encode()).hexdigest()[:16]
    scope = run_scope(rep.run_id, chain)
    listed = s3.list_objects_v2(Bucket=artifacts, Prefix="runs/")
    assert sorted(o["Key"] for o in listed.get("Contents", [])) == sorted(
        f"runs/{scope}/in/{k}.csv" for k in range(1, PAIRS + 1)
    )
    assert [p for w in workdirs for p in w.rglob("*") if p.is_file()] == []
    # the tool calls spread over the workers: the history says which one started each
    started = Counter(
        e.activity_task_started_event_attributes.identity
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    )
    assert sum(started.values()) == 2 * PAIRS
    assert len(started) > 1, started


@pytest.mark.parametrize(("raw", "problem"), [
    ("bucket/runs", "must be s3://bucket[/prefix]"),
    ("s3://Not_A_Bucket", "is not an S3 bucket name"),
    ("s3://art/a//b", "empty, . or .. segment"),
    ("s3://art/../x", "empty, . or .. segment"),
])
def test_a_bad_artifacts_setting_names_what_is_wrong(raw, problem):
    with pytest.raises(ValueError, match="PLANGATE_ARTIFACTS") as e:
        Settings.from_env({"PLANGATE_ARTIFACTS": raw})
    assert problem in str(e.value)


def test_the_artifact_bucket_is_never_a_target():
    s = Settings.from_env({"PLANGATE_ARTIFACTS": "s3://art/runs/"}).world
    assert (s.artifacts_bucket, s.artifacts_prefix) == ("art", "runs")
    assert "run artifacts" in str(s.scope.refusal("bucket", "art"))
    assert s.scope.refusal("bucket", "drops") is None
    assert Settings.from_env({}).world.artifacts_bucket is None
