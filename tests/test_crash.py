"""A worker process killed with SIGKILL mid-run, a few times, and started again: every run ends,
every credit, e-mail and S3 write is in the world exactly once, no step is lost, and no run halts
for a person where the world could say what happened (``tests/crash_harness.py``; the full run
with at least 100 kills is ``python -m bench.crash``). One kill is aimed at a credit in flight.
And what the full run found: a write whose every attempt was lost is tried again, reading the
world first, instead of re-planned (``workflows.dispatch``: a lost call)."""

from __future__ import annotations

import uuid
from typing import Any

from plangate.testing import attempts, running_worker, scheduled
from tests.crash_harness import (
    CrashConfig,
    CrashHarness,
    LostPut,
    object_versions,
    put_plan,
)
from tests.heartbeat import BEAT_ENV

# the first kill waits for a credit in flight (its account's row held by the harness): that
# one's outcome is read back by idempotency key (absent: its transaction died with the worker)
CONFIG = CrashConfig(
    seed=12, kills=3, plans=3, concurrency=3, steps=8, kill_after_s=(0.3, 2.0), aimed=1
)


async def test_worker_killed_mid_run_leaves_every_effect_once(client, settings, stack, s3,
                                                              tmp_path):
    # the killed worker's calls time out at the worker's heartbeat timeout (10 s here)
    harness = CrashHarness(client, settings, {**stack.env(), **BEAT_ENV}, tmp_path)
    result = await harness.run(CONFIG, s3)
    report = "\n".join(result.lines())
    print(report)
    assert result.kills == CONFIG.kills
    assert result.aimed == 1, report
    # the credit killed in flight: its call timed out, the world was read by its key first
    assert result.history["activity timed out"] >= 1, report
    assert result.read_backs()["absent"] >= 1, report
    assert len(result.plans) >= CONFIG.plans
    assert not result.unfinished, report
    assert all(r.status.final for r in result.reports.values()), report
    assert not result.duplicates and not result.stray, report
    assert not result.lost, report
    assert result.history["workflow task failed"] == 0, report
    # every effect was counted: each step's identity was looked up in the world
    assert len(result.counts) == sum(len(p.expected) for p in result.plans)
    assert not result.halted, report


async def lost_put(client, settings, s3, world, lands: bool) -> tuple[Any, LostPut, list[str]]:
    bucket, key = f"lost-{uuid.uuid4().hex[:8]}", "out/report.txt"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    tool = LostPut(world, lands)
    async with running_worker(client, settings, {"s3.put": tool.run}) as h:
        rep = await h.run(put_plan(bucket, key))
    return rep, tool, object_versions(s3, bucket).get(key, [])


async def test_a_lost_write_that_landed_is_found_done(client, settings, s3, world):
    rep, tool, versions = await lost_put(client, settings, s3, world, lands=True)
    assert rep.status == "succeeded", rep.escalation
    assert rep.replans_used == 0 and rep.plan_version == 1
    assert rep.step(1).state == "SKIPPED"  # the world read first: the content is there
    assert tool.calls == 3  # the lost call's three attempts; never called again
    assert versions == ["once"]
    # one call, its three attempts lost; tried again by the workflow, which read first
    assert (await attempts(client, rep.run_id))["s3.put"] == [3]
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == 1


async def test_a_lost_write_that_did_not_land_goes_again(client, settings, s3, world):
    rep, tool, versions = await lost_put(client, settings, s3, world, lands=False)
    assert rep.status == "succeeded", rep.escalation
    assert rep.replans_used == 0 and rep.plan_version == 1
    assert rep.step(1).state == "DONE"
    assert tool.calls == 4  # the lost call's three attempts, then one that answered
    assert versions == ["once"]
    assert (await attempts(client, rep.run_id))["s3.put"] == [3, 1]
