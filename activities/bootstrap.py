"""Tables plangate itself keeps in Postgres, in schema ``plangate`` (never a load target), then
those of the deployment's extensions (``activities.extensions``: schema ``demo`` only where the
demo systems are on).

- ``plangate.jobs``: job states ``job_state`` reads and ``set_job_state`` writes;
- ``plangate.loads``: what each ``warehouse.load`` put in its target (the source's SHA-256 and
  its data-row count), written in the load's own transaction, read by ``table_loaded_from``.
"""

from __future__ import annotations

from activities.extensions import registry_for
from world.clients import World

OWN_SCHEMA = "plangate"

SCHEMA = """
CREATE SCHEMA IF NOT EXISTS plangate;

CREATE TABLE IF NOT EXISTS plangate.jobs (
    job_id text PRIMARY KEY,
    state text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS plangate.loads (
    target text PRIMARY KEY,
    source_sha256 text NOT NULL,
    rows bigint NOT NULL,
    idempotency_key text NOT NULL,
    loaded_at timestamptz NOT NULL DEFAULT now()
);
"""

# Two workers bootstrapping at once must not race on CREATE SCHEMA / CREATE TABLE.
_LOCK = "SELECT pg_advisory_xact_lock(hashtext('plangate.schema'))"


async def ensure_schema(world: World) -> None:
    pool = await world.pool()
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK)
        await conn.execute(SCHEMA)
    for ensure in registry_for(world.settings).schemas.values():
        await ensure(world)
