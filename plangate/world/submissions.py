"""Each signed submission starts one run: ``plangate.submissions`` keeps which run chain (its
workflow id and the first run Temporal gave it) a submission was first taken for. The same
submission presented again, by a run started under the same id once the first ended (a
captured submission replayed within its ten minutes), acts for nobody: the guard refuses it
(``activities.guarding``). A reset or a continued run keeps its first run, so it is the same
chain, and its own again.
"""

from __future__ import annotations

import hashlib

from plangate.records.proofs import Submission
from plangate.world.clients import World

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
