"""``plangate.receipts``: the signed receipt of each ledgered effect (``records.receipts``), one
row per effect, keyed by the effect ledger's key, written by the worker's role alone (the tool's
activity, at the call's conclusion; never a plan, a model or a submitter).

A key holds one receipt. A receipt of a call that certainly did not act (``failed``) or may have
(``unknown``) is replaced by the receipt of a later attempt under the same key; a ``done`` one
is never replaced, so a call answered from the ledger, retried or reset makes no second receipt.
The row keeps the line exactly as signed (text, not jsonb: jsonb would re-spell numbers).
"""

from __future__ import annotations

from pydantic import JsonValue

from plangate.records.receipts import line
from plangate.world import pg
from plangate.world.clients import World

_WRITE = """
INSERT INTO plangate.receipts (idempotency_key, run_id, state, receipt)
VALUES (%s, %s, %s, %s)
ON CONFLICT (idempotency_key) DO UPDATE SET state = EXCLUDED.state,
    receipt = EXCLUDED.receipt, made_at = now()
    WHERE plangate.receipts.state <> 'done'
"""
_OF_RUN = """
SELECT r.receipt FROM plangate.receipts r
WHERE r.run_id = %s ORDER BY r.made_at, r.idempotency_key
"""
_OF_KEY = "SELECT receipt FROM plangate.receipts WHERE idempotency_key = %s"


async def write(world: World, key: str, run_id: str, state: str,
                receipt: dict[str, JsonValue]) -> None:
    """The receipt of the effect of ``key`` (its run, its outcome's state). Raises ``psycopg``
    errors: the caller decides what a receipt that did not go in costs (never the call)."""
    async with pg.reading(world) as conn:
        await conn.execute(_WRITE, (key, run_id, state, line(receipt)))


async def of_run(world: World, run_id: str) -> list[str]:
    """The receipts of a run (its workflow id), as signed lines, in the order they were made."""
    async with pg.reading(world) as conn:
        cur = await conn.execute(_OF_RUN, (run_id,))
        return [str(r[0]) for r in await cur.fetchall()]


async def of_key(world: World, key: str) -> str | None:
    """The receipt of one effect, as its signed line, if one was written."""
    async with pg.reading(world) as conn:
        cur = await conn.execute(_OF_KEY, (key,))
        row = await cur.fetchone()
        return None if row is None else str(row[0])
