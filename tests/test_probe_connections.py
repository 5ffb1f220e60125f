"""A probe's reads of Postgres share one pooled connection: a read that holds one connection
and asks the pool for another can wait for ever when every connection is held by such reads
(with 50 plans on one worker, loads failed with "couldn't get a connection after 3.00 sec")."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import replace

from temporalio.testing import ActivityEnvironment

from plangate.activities.probe_activity import ProbeActivities
from plangate.plans.model import Condition
from plangate.records import keys
from plangate.records.calls import Outcome, ProbeRequest, StepRef
from plangate.world.scopes import run_scope


async def test_a_load_is_read_back_with_one_connection_left(world, settings, pg):
    tag = uuid.uuid4().hex[:8]
    table, source = f"public.loaded_{tag}", f"loads/{tag}.csv"
    body = b"id\n1\n2\n"
    run_id, chain = f"r-{tag}", "0" * 16
    world.files.write(run_scope(run_id, chain), source, [body])  # the run's own file
    await pg.execute(f"CREATE TABLE {table} (id int)")  # the test's own literal name
    await pg.execute(f"INSERT INTO {table} VALUES (1), (2)")
    await pg.execute(
        "INSERT INTO plangate.loads (target, source_sha256, rows, idempotency_key) "
        "VALUES (%s, %s, 2, %s)", (table, hashlib.sha256(body).hexdigest(), f"k-{tag}"),
    )
    read = ProbeRequest(
        step=StepRef(run_id=run_id, plan_version=1, n=1, tool="warehouse.load"),
        conditions=[Condition(probe="table_loaded_from", args={"table": table, "source": source})],
        idempotency_key=keys.idempotency_key(run_id, chain, "v1/1"),
    )
    env = ActivityEnvironment()  # the probe activity of that run, as Temporal would say
    env.info = replace(env.info, workflow_id=run_id)
    pool = await world.pool()
    held = [await pool.getconn() for _ in range(pool.max_size - 1)]  # every other read's
    try:
        report = await env.run(ProbeActivities(world, settings.catalogue).read, read)
    finally:
        for conn in held:
            await pool.putconn(conn)
    (result,) = report.results
    assert result.outcome is Outcome.HOLDS, result.detail
    assert result.observed == {"source_sha256": hashlib.sha256(body).hexdigest()[:16], "rows": 2}
