"""Runs past the worker's cache (``PLANGATE_MAX_CACHED_RUNS``): evicted while they wait, replayed
from their history when a person answers, each step acting once."""

from __future__ import annotations

import uuid
from dataclasses import replace

from plangate.client.api import Plangate
from plangate.testing import running_worker, scheduled
from plangate.worker.assembly import build_worker
from plangate.world.clients import World
from tests.test_answers import job_states, job_step


async def test_the_worker_keeps_as_many_runs_as_the_deployment_says(client, settings):
    s = replace(settings, temporal=replace(settings.temporal, max_cached_runs=7))
    world = World(s.world)
    try:
        worker = await build_worker(client, s, world, bootstrap=False)
        assert worker.config()["max_cached_workflows"] == 7
    finally:
        await world.close()


async def test_runs_waiting_past_the_cache_are_evicted_and_each_acts_once(client, settings, pg):
    tag = f"cache-{uuid.uuid4().hex[:8]}"
    s = replace(settings, temporal=replace(settings.temporal, max_cached_runs=1))
    plans = [
        {"goal": "past the cache", "budget": {"replans_max": 0},
         "steps": [job_step(1, f"{tag}-{i}", approval="required")]}
        for i in range(3)
    ]
    async with running_worker(client, s) as h:
        api = Plangate(client, h.settings)
        runs = [await api.start(p) for p in plans]
        # three runs wait for a person on a worker that keeps one: two were evicted
        cards = [await api.wait_for_card(r, 1) for r in runs]
        assert not await job_states(pg, tag)  # nothing acted before the answers
        for r, card in zip(runs, cards, strict=True):
            await api.approve(r, 1, card.digest, by="erin")
        reports = [await api.result(r) for r in runs]
    assert [r.status for r in reports] == ["succeeded"] * 3
    for r in runs:
        assert (await scheduled(client, r))["warehouse.run_sql"] == 1
    assert await job_states(pg, tag) == {f"{tag}-{i}": "done" for i in range(3)}
