"""Running totals from the effect ledger (issue 36, item 4): what a principal's effects add up
to in the last hour and day, calls in flight included and failed calls not, and a limit
decided against them that holds under concurrency: of ten calls started at once under a 5,000
limit, exactly five 1,000 calls are admitted, never six. On the real Postgres."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal
from typing import Any

import pytest

from plangate.records import keys
from plangate.world import ledger
from plangate.world.errors import ToolError


def intent(principal: str, amount: int | None = 1000, tool: str = "billing.issue_credit",
           key: str | None = None, resource: str = "table:demo.credits") -> ledger.Intent:
    run = f"plan-{uuid.uuid4().hex[:12]}"
    return ledger.Intent(
        key=key or keys.idempotency_key(run, uuid.uuid4().hex[:16], "v1/1"), run_id=run,
        step=1, plan_version=1,
        tool=tool, args_sha256=uuid.uuid4().hex, effect="money", principal=principal,
        amount=None if amount is None else Decimal(amount), resource=resource,
    )


def at_most(limit: int) -> ledger.Gate:
    async def gate(t: ledger.LedgerTotals) -> None:
        if t.amount_hour + 1000 > limit:
            raise ToolError("policy_denied", f"{t.amount_hour} moved this hour")
    return gate


async def test_a_limit_holds_under_concurrency(world, pg):
    principal = f"p-{uuid.uuid4().hex[:8]}"
    calls = [intent(principal) for _ in range(10)]

    async def one(i: ledger.Intent) -> str:
        try:
            await ledger.begin(world, i, gate=at_most(5000))
        except ToolError as e:
            return e.code
        return "admitted"

    got = await asyncio.gather(*(one(i) for i in calls))
    assert sorted(got) == ["admitted"] * 5 + ["policy_denied"] * 5
    cur = await pg.execute(
        "SELECT count(*), sum(amount) FROM plangate.effects WHERE principal = %s", (principal,))
    assert await cur.fetchone() == (5, Decimal(5000))  # refused calls left no row


async def test_totals_count_calls_in_flight_and_leave_out_failed_ones(world, pg):
    principal = f"p-{uuid.uuid4().hex[:8]}"
    done, open_, failed, other_tool = (
        intent(principal, 100), intent(principal, 20), intent(principal, 3),
        intent(principal, 4, tool="pay.other", resource="tool:pay.other"))
    for i in (done, open_, failed, other_tool):
        assert (await ledger.begin(world, i)).fresh
    await ledger.settle(world, done.key, ledger.State.DONE, {})
    await ledger.settle(world, failed.key, ledger.State.FAILED, None, "refused")
    old = intent(principal, 1000)
    await ledger.begin(world, old)
    await pg.execute("UPDATE plangate.effects SET intent_at = now() - interval '2 hours' "
                     "WHERE idempotency_key = %s", (old.key,))
    t = await ledger.totals(world, principal, "billing.issue_credit")
    assert (t.amount_hour, t.calls_hour) == (Decimal(124), 3)
    assert (t.amount_day, t.calls_day) == (Decimal(1124), 4)
    assert (t.tool_amount_hour, t.tool_calls_hour) == (Decimal(120), 2)
    assert (t.tool_amount_day, t.tool_calls_day) == (Decimal(1120), 3)
    assert (t.resource_amount_hour, t.resource_calls_hour) == (Decimal(0), 0)  # none named
    by = await ledger.totals(world, principal, "billing.issue_credit", "tool:pay.other")
    assert (by.resource_amount_hour, by.resource_calls_day) == (Decimal(4), 1)
    here = await ledger.totals(world, principal, "billing.issue_credit", "table:demo.credits")
    assert (here.resource_amount_hour, here.resource_amount_day) == (Decimal(120), Decimal(1120))
    assert await ledger.totals(world, f"p-{uuid.uuid4().hex[:8]}", "x") == ledger.LedgerTotals()


async def test_a_known_key_is_not_admitted_again(world, pg):
    """A retry of a call already recorded was admitted when it was: its gate is not asked
    (it would count the call's own row against it)."""
    principal = f"p-{uuid.uuid4().hex[:8]}"
    first = intent(principal)
    assert (await ledger.begin(world, first, gate=at_most(1000))).fresh
    asked: list[Any] = []

    async def refuse_all(t: ledger.LedgerTotals) -> None:
        asked.append(t)
        raise ToolError("policy_denied", "no")

    again = await ledger.begin(world, first, gate=refuse_all)
    assert not again.fresh and again.entry is not None
    assert again.entry.state is ledger.State.INTENT
    assert asked == []
    with pytest.raises(ToolError):
        await ledger.begin(world, intent(principal), gate=refuse_all)
    assert len(asked) == 1 and asked[0].amount_hour == Decimal(1000)
