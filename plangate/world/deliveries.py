"""``plangate.deliveries``: each card's notice on each channel (``email``, ``webhook``), written
by the approval page's delivery loop (``servers.notify``). A row per (card digest, channel):

- ``claim``: one page process takes the notice for ``lease_s`` (INSERT ... ON CONFLICT: the row's
  lock orders two processes; the one that finds it claimed, delivered, waiting for its next try
  or out of tries gets nothing), so two processes never both send it;
- ``settle``: the attempt's outcome: ``delivered_at``, or the error and when to try next;
  ``attempts`` counts both, ``last_error`` is the latest failed attempt's (kept once a later
  one delivers: 2 attempts, ``HTTP 500``, delivered). A process that dies between claim and
  settle leaves the lease to run out; the notice is then sent again (at least once, at most
  once per lease).

Nothing a run does reads this table: a notice is bookkeeping beside the run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from plangate.world.clients import World

_CLAIM = """
INSERT INTO plangate.deliveries AS d
    (digest, channel, deployment, run_id, step, expires_at, claimed_until)
VALUES (%(digest)s, %(channel)s, %(deployment)s, %(run_id)s, %(step)s, %(expires_at)s,
        now() + make_interval(secs => %(lease_s)s))
ON CONFLICT (digest, channel) DO UPDATE SET claimed_until = excluded.claimed_until
WHERE d.delivered_at IS NULL AND d.claimed_until <= now() AND d.next_at <= now()
  AND d.attempts < %(most)s
RETURNING d.attempts
"""

_SETTLE = """
UPDATE plangate.deliveries SET attempts = attempts + 1, last_at = now(),
    last_error = COALESCE(%(error)s, last_error), claimed_until = now(),
    delivered_at = CASE WHEN %(error)s::text IS NULL THEN now() END,
    next_at = now() + make_interval(secs => %(retry_s)s)
WHERE digest = %(digest)s AND channel = %(channel)s
"""


@dataclass(frozen=True)
class Notice:
    """One card's notice on one channel."""

    digest: str
    channel: str
    deployment: str
    run_id: str
    step: int
    expires_at: datetime


async def claim(world: World, n: Notice, lease_s: float, most: int) -> int | None:
    """The attempts made so far where this process now holds the notice for ``lease_s``; None
    where it is another's, delivered, not yet due again, or out of its ``most`` tries."""
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute(_CLAIM, {
            "digest": n.digest, "channel": n.channel, "deployment": n.deployment,
            "run_id": n.run_id, "step": n.step, "expires_at": n.expires_at,
            "lease_s": lease_s, "most": most})
        row = await cur.fetchone()
        return None if row is None else int(row[0])


async def settle(world: World, n: Notice, error: str | None, retry_s: float) -> None:
    """The attempt's outcome: delivered (``error`` None) or failed, tried again in ``retry_s``."""
    pool = await world.pool()
    async with pool.connection() as conn:
        await conn.execute(_SETTLE, {"digest": n.digest, "channel": n.channel, "error": error,
                                     "retry_s": retry_s})


async def settled(world: World, deployment: str, most: int) -> set[tuple[str, str]]:
    """The (digest, channel) of the deployment's notices that no claim would take again:
    delivered, or out of tries; one query, so a pass claims only the notices still owed."""
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT digest, channel FROM plangate.deliveries WHERE deployment = %s "
            "AND expires_at > now() AND (delivered_at IS NOT NULL OR attempts >= %s)",
            (deployment, most))
        return {(d, c) for d, c in await cur.fetchall()}


@dataclass(frozen=True)
class Delivery:
    """A notice as the table holds it."""

    digest: str
    channel: str
    run_id: str
    step: int
    attempts: int
    last_error: str | None
    delivered_at: datetime | None


async def of_run(world: World, run_id: str) -> list[Delivery]:
    """The notices of a run's cards, oldest card first."""
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT digest, channel, run_id, step, attempts, last_error, delivered_at "
            "FROM plangate.deliveries WHERE run_id = %s ORDER BY expires_at, channel",
            (run_id,))
        return [Delivery(*r) for r in await cur.fetchall()]
