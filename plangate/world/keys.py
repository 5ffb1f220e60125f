"""The deployment's own secrets, kept where its workers already meet: ``plangate.keys`` in the
deployment's Postgres (plangate's schema: never a plan's target, never readable by a principal's
role). Each is made once, by the first worker that needs it, and read by every worker after.

- ``call-seal``: the key of the call seal (``records.seal``): plangate's workflows seal every
  activity they schedule with it, and each activity verifies the seal before it acts.
"""

from __future__ import annotations

import os

from plangate.records.seal import KEY_BYTES
from plangate.world.clients import World

SEAL = "call-seal"

_READ = "SELECT key FROM plangate.keys WHERE name = %s"
_MAKE = "INSERT INTO plangate.keys (name, key) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING"


async def seal_key(world: World) -> bytes:
    """The deployment's seal key, made on first use (two workers at once agree: the first
    insert wins and both read it)."""
    pool = await world.pool()
    async with pool.connection() as conn:
        row = await (await conn.execute(_READ, (SEAL,))).fetchone()
        if row is None:
            await conn.execute(_MAKE, (SEAL, os.urandom(KEY_BYTES)))
            row = await (await conn.execute(_READ, (SEAL,))).fetchone()
    if row is None or len(bytes(row[0])) < KEY_BYTES:
        raise RuntimeError("plangate.keys holds no usable call-seal key")
    return bytes(row[0])
