"""Version-bound writes without hand work: 100 runs update one record at once, each write
carrying the version its own pre probe read. Zero lost updates: exactly one write lands per
version, and every other run is refused by the system itself (409) and re-plans or stops, never
overwriting what it did not read."""

from __future__ import annotations

import asyncio
import uuid

from plangate.client.api import Plangate
from plangate.demo.schema import Account, seed_account
from plangate.testing import running_worker

RUNS = 100


async def test_100_concurrent_updates_of_one_record_lose_none(client, settings, world, pg):
    aid = f"acct_{uuid.uuid4().hex[:8]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example"))
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        plans = [
            {"goal": f"re-point {aid}", "budget": {"replans_max": 0}, "steps": [
                {"n": 1, "tool": "customer.update",
                 "args": {"account_id": aid, "billing_contact": f"ar-{i}@{aid}.example"}},
            ]}
            for i in range(RUNS)
        ]
        run_ids = await asyncio.gather(*(api.start(p) for p in plans))
        reports = await asyncio.gather(*(api.result(r) for r in run_ids))
    # a write that landed: its call returned (a later write may have overwritten it since, so
    # its post check may fail: the world moved after it, not under it)
    landed = [r for r in reports if r.step(1).result is not None]
    refused = [r for r in reports if r.failure is not None and r.failure.code == "resource_moved"]
    assert landed and len(landed) + len(refused) == RUNS
    for r in refused:  # refused by the record's version, before it wrote anything
        assert r.failure is not None and r.failure.status == 409
        assert r.metrics.answers_409 == 1 and r.step(1).result is None
    cur = await pg.execute(
        "SELECT version, billing_contact FROM demo.customers WHERE account_id = %s", (aid,)
    )
    version, contact = await cur.fetchone()
    # one version step per landed write: none landed on a version it had not read
    assert version == 1 + len(landed)
    written = {int(str(w["version"])): w for r in landed if (w := r.step(1).result)}
    assert sorted(written) == list(range(2, 2 + len(landed)))  # each write its own version
    assert contact == written[version]["billing_contact"]
