"""What one pass of the approval page's delivery loop costs once every card has been sent
(issue 51): ``--cards`` runs awaiting approval in the runs index, each card delivered on two
channels, and the pass as it is (one query for the notices settled, then no claim) against the
pass that claims every notice again (``INSERT ... ON CONFLICT`` per card and channel, as before
the query), alternating, on one embedded stack. Nothing is sent in either: every claim finds
its notice delivered.

    .venv/bin/python -m bench.notices [--cards 2000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from bench._stack import bench_stack
from plangate.activities.bootstrap import ensure_schema
from plangate.plans.model import Effect
from plangate.records.approvals import ApprovalCard, ApprovalRecord
from plangate.records.report import RunStatus
from plangate.records.run_index import IndexRow
from plangate.servers.notify.loop import Deliveries
from plangate.servers.notify.settings import Email, Notify
from plangate.world import deliveries, run_index
from plangate.world.clients import World


async def seed(world: World, deployment: str, cards: int) -> None:
    """``cards`` runs awaiting approval, each card delivered on both channels."""
    now = datetime.now(UTC)
    pool = await world.pool()
    for i in range(cards):
        run_id = f"bench-notice-{deployment}-{i}"
        card = ApprovalCard(run_id=run_id, plan_version=1, step=1, tool="s3.put",
                            effect=Effect.WRITE, args={"bucket": "b", "key": f"k{i}"},
                            issued_at=now, expires_at=now + timedelta(hours=1))
        rec = ApprovalRecord(step=1, plan_version=1, digest=card.digest(),
                             expires_at=card.expires_at, card=card)
        row = IndexRow(status=RunStatus.AWAITING_APPROVAL, goal="bench", cards=[rec],
                       started_at=now, seq=1)
        await run_index.record(world, run_id, f"exec-{i}", deployment, row)
        async with pool.connection() as conn:
            await conn.execute(
                "INSERT INTO plangate.deliveries (digest, channel, deployment, run_id, step, "
                "expires_at, attempts, claimed_until, delivered_at) SELECT %s, c, %s, %s, 1, "
                "%s, 1, now(), now() FROM unnest(ARRAY['email', 'webhook']) AS c",
                (rec.digest, deployment, run_id, rec.expires_at))


@contextmanager
def claiming_all() -> Iterator[None]:
    """The pass as before the settled query: nothing known settled, every notice claimed."""
    real = deliveries.settled

    async def none(world: World, deployment: str, most: int) -> set[tuple[str, str]]:
        return set()

    deliveries.settled = none  # restored below
    try:
        yield
    finally:
        deliveries.settled = real


async def main(cards: int, rounds: int) -> None:
    async with bench_stack() as b:
        await ensure_schema(b.world, b.settings.catalogue)
        deployment = uuid.uuid4().hex[:8]
        await seed(b.world, deployment, cards)
        notify = Notify(email=Email("127.0.0.1", 9, "p@example.org", ("e@example.org",)),
                        webhook="http://127.0.0.1:9/")
        loop = Deliveries(b.world, deployment, notify, "http://127.0.0.1:8765/")
        times: dict[str, list[float]] = {"settled query": [], "claim each": []}
        for i in range(rounds + 1):
            for kind in (("settled query", "claim each") if i % 2 else
                         ("claim each", "settled query")):
                t0 = time.perf_counter()
                if kind == "claim each":
                    with claiming_all():
                        sent = await loop.once()
                else:
                    sent = await loop.once()
                assert sent == 0
                if i:  # the first round warms the pool
                    times[kind].append((time.perf_counter() - t0) * 1000)
        now, before = (statistics.median(times[k]) for k in ("settled query", "claim each"))
        print(f"one pass over {cards} cards delivered on 2 channels ({rounds} rounds each)")
        print(f"  settled query  median {now:8.1f} ms")
        print(f"  claim each     median {before:8.1f} ms")
        print(f"  claim each / settled query: {before / now:.1f}x")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--cards", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=10)
    a = p.parse_args()
    asyncio.run(main(a.cards, a.rounds))
