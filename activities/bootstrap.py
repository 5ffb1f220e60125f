"""Tables plangate itself keeps in Postgres (the jobs table ``job_state`` reads), then the demo
systems' tables (``activities.demo_schema``)."""

from __future__ import annotations

from activities.demo_schema import ensure_demo_schema
from activities.world import World

SCHEMA = """
CREATE TABLE IF NOT EXISTS plangate_jobs (
    job_id text PRIMARY KEY,
    state text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
)
"""


async def ensure_schema(world: World) -> None:
    pool = await world.pool()
    async with pool.connection() as conn:
        await conn.execute(SCHEMA)
    await ensure_demo_schema(world)
