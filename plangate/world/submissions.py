"""Each signed submission starts one run: ``plangate.submissions`` keeps which run chain (its
workflow id and the first run Temporal gave it) a submission was first taken for. The same
submission presented again, by a run started under the same id once the first ended (a
captured submission replayed within its ten minutes), acts for nobody: the guard refuses it
(``activities.guarding``). A reset or a continued run keeps its first run, so it is the same
chain, and its own again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time

from plangate.records.proofs import Submission
from plangate.world.clients import World

log = logging.getLogger(__name__)
# Postgres down at a run's start: the claim is tried again for this long (inside the guard's
# own 30 s), then the run is refused, acting on nothing
PATIENCE_S = 20.0
RETRY_S = 1.0

_CLAIM = """
INSERT INTO plangate.submissions (signature_sha256, submitter, workflow_id, execution)
VALUES (%s, %s, %s, %s) ON CONFLICT (signature_sha256) DO NOTHING
"""
_TAKEN = "SELECT execution FROM plangate.submissions WHERE signature_sha256 = %s"


def _digest(sub: Submission) -> str:
    return hashlib.sha256(sub.signature.encode()).hexdigest()


async def claim(world: World, sub: Submission, execution: str) -> str | None:
    """None where ``execution`` may act on ``sub`` (its first use, or this execution's own
    again); else the execution that took it first."""
    digest = _digest(sub)
    pool = await world.pool()
    async with pool.connection() as conn:
        await conn.execute(_CLAIM, (digest, sub.submitter, sub.workflow_id, execution))
        row = await (await conn.execute(_TAKEN, (digest,))).fetchone()
    taken = None if row is None else str(row[0])
    return None if taken == execution else taken or "another run"


class Unrecorded(Exception):
    """The claim could not be written: Postgres did not answer within ``PATIENCE_S``."""


async def claim_patiently(world: World, sub: Submission, execution: str,
                          patience_s: float = PATIENCE_S) -> str | None:
    """``claim``, tried again while Postgres does not answer, for ``patience_s`` at most."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            return await claim(world, sub, execution)
        except Exception as e:  # unreachable, or the pool gave up waiting
            if time.monotonic() + RETRY_S > deadline:
                raise Unrecorded(
                    f"the submission of {sub.submitter} could not be recorded as this run's "
                    f"(the deployment's Postgres did not answer for {patience_s:.0f} s): "
                    "nothing ran") from e
            log.warning("the submission's claim waits for Postgres: %s", e)
            await asyncio.sleep(RETRY_S)
