"""Faults at every point of many runs (issue 47), small: ``bench.fault_points`` runs it with
hundreds of runs and faults."""

from __future__ import annotations

from tests.fault_points import SYSTEMS, FaultSoak, Kind, SoakConfig
from tests.heartbeat import BEAT_ENV


async def test_faults_at_every_point_of_many_runs(client, settings, stack, s3, tmp_path):
    """The fault bench (``bench.fault_points``) small: plans of two credits and two S3 puts on
    two workers of one queue; worker A meets a fault (Postgres, S3 or Temporal held or reset,
    some past every try) at the points of its activities, worker B is SIGKILLed and started
    again. No run fails, none is duplicated or misreported, every windows row is written."""
    # at most 16 faults: a run met 44 in 60 s and another 7 in 17 s (how many worker A meets
    # is its share of the queue); the soak ran 25-118 s in the full suite before the bound
    cfg = SoakConfig(seed=4701, runs=8, concurrency=8, fault_every=1, long_share=0.1,
                     long_s=(8.0, 10.0), kill_every_s=(5.0, 8.0), settle_s=400.0,
                     owed_within_s=60.0, max_faults=16)
    # the killed worker's calls are taken for lost at the short heartbeat (tests/heartbeat.py)
    out = await FaultSoak(client, settings, {**stack.env(), **BEAT_ENV}, tmp_path).soak(cfg, s3)
    report = "\n".join(out.lines())
    print(report)
    c = out.crash
    assert not c.unfinished and len(c.reports) == cfg.runs, report
    assert not out.failed, report
    assert len(c.halted) <= 1, report
    assert not c.duplicates and not c.stray and not out.misreported, report
    assert not out.windows_missing, report
    # the faults were real and various: each system met some, of both kinds, and worker B was
    # killed. How many worker A meets is the queue's share (worker B takes the rest, all of it
    # while A's Temporal is held), so the count is not asserted: 7 under CI's load, 8+ quiet
    assert {i.system for i in out.injected} == set(SYSTEMS), report
    assert {i.kind for i in out.injected} == set(Kind), report
    assert out.kills >= 1, report
