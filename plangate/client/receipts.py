"""A run's receipts, for the Python API and ``plangate receipt RUN``: read from the
deployment's Postgres (``plangate.receipts``), as the worker signed them. Verifying one needs
none of this: ``records.receipts.verify_receipts`` and the deployment's public key."""

from __future__ import annotations

from plangate.world import receipts
from plangate.world.clients import World
from plangate.world.settings import WorldSettings


async def receipts_of_run(settings: WorldSettings, run_id: str) -> list[str]:
    """The receipts of run ``run_id`` (its workflow id), one signed JSON line each, in the
    order the worker made them."""
    world = World(settings)
    try:
        return await receipts.of_run(world, run_id)
    finally:
        await world.close()
