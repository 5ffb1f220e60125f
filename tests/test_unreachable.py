"""A probe whose system does not answer fails its step once the run's outage patience is spent
(none here): the guarded tool is never called, and nothing is re-planned (``test_outages``
waits an outage out)."""

from __future__ import annotations

import socket
from dataclasses import replace

from plangate.testing import attempts, running_worker, scheduled
from plangate.world.clients import World


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens here once the socket closes


async def test_s3_unreachable_never_calls_the_tool(client, settings):
    settings = replace(settings, runs=replace(settings.runs, outage_patience_s=0.0))
    down = f"http://127.0.0.1:{closed_port()}"
    dead = World(replace(settings.world, s3_endpoint_url=down))
    plan = {"goal": "fetch", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": "vendor-drops", "key": "k.csv", "dest": "dead/k.csv"}},
        {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
         "args": {"statement": "select_one"}},
    ]}
    async with running_worker(client, settings, world=dead) as h:
        rep = await h.run(plan)
    calls = await scheduled(client, rep.run_id)
    # the guards derived, step 1's pre check, and nothing after it
    assert calls == {"guard.resolve": 1, "probe.evaluate": 1}
    assert rep.status == "halted"
    assert rep.failure is not None and rep.failure.code == "system_unavailable"
    assert (await attempts(client, rep.run_id))["probe.evaluate"] == [3]  # bounded, then fails
    results = [r for c in rep.step(1).checks for r in c.results]
    assert results and all(r.outcome == "unknown" and r.unreachable for r in results)


async def test_postgres_unreachable_never_calls_the_tool(client, settings):
    url = f"postgresql://postgres@127.0.0.1:{closed_port()}/postgres"
    settings = replace(settings, runs=replace(settings.runs, outage_patience_s=0.0))
    dead = World(replace(settings.world, database_url=url))
    plan = {"goal": "index", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "create_index",
                  "params": {"name": "ix_dead", "table": "dead_table", "column": "id"}},
         "pre": [{"probe": "column_exists", "table": "dead_table", "column": "id"}]},
    ]}
    async with running_worker(client, settings, world=dead) as h:
        rep = await h.run(plan)
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == 0
    assert rep.failure is not None and rep.failure.code == "system_unavailable"
    assert rep.status == "halted" and rep.step(1).state == "HALTED"
