"""Money and external effects never twice: once such a call may have acted, the world is read
by idempotency key before anything else, and no new plan version (a new key) is started while
the first call's effect may exist."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio import activity

from plangate.activities.tool_activity import as_application_error
from plangate.activities.tools import TOOLS, CallContext
from plangate.demo.schema import Account, seed_account
from plangate.records import keys
from plangate.records.calls import ToolCall, ToolResult
from plangate.testing import attempts, running_worker, scheduled
from plangate.world.clients import World
from plangate.world.errors import ToolError


async def closed_account(world: World) -> str:
    aid = f"acct_{uuid.uuid4().hex[:8]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", status="closed"))
    return aid


def credit_plan(aid: str, replans_max: int = 2) -> dict[str, Any]:
    return {"goal": f"credit {aid}", "budget": {"replans_max": replans_max}, "steps": [
        {"n": 1, "tool": "billing.issue_credit",
         "args": {"account_id": aid, "amount_eur": 612.40}},
        {"n": 2, "tool": "email.send", "depends_on": [1],
         "args": {"to": f"ar@{aid}.example", "template": "account_closed", "account_id": aid}},
    ]}


async def credits(pg: Any, aid: str) -> list[tuple[float, str, str]]:
    cur = await pg.execute(
        "SELECT amount_eur::float, applied_to, idempotency_key FROM demo.credits "
        "WHERE account_id = %s", (aid,))
    return list(await cur.fetchall())


class CommitsThenDrops:
    """The real credit, committed; then the connection drops before the answer arrives."""

    def __init__(self, world: World, acts: bool = True, fail_times: int = 99) -> None:
        self.world, self.acts, self.fail_times = world, acts, fail_times
        self.keys: list[str] = []

    @activity.defn(name="billing.issue_credit")
    async def run(self, call: ToolCall) -> ToolResult:
        self.keys.append(call.idempotency_key)
        spec = TOOLS["billing.issue_credit"]
        if self.acts or len(self.keys) > self.fail_times:
            ctx = CallContext(call.step.run_id, call.step.n, call.idempotency_key)
            out = await spec.fn(spec.args.model_validate(call.step.args), self.world, ctx)
            if len(self.keys) > self.fail_times:
                now = activity.info().started_time
                return ToolResult(output=out, started_at=now, finished_at=now)
        raise as_application_error(ToolError("unavailable", "connection lost after commit"))


async def test_a_credit_that_committed_before_the_connection_dropped_is_done(
    client, settings, pg, world
):
    aid = await closed_account(world)
    tool = CommitsThenDrops(world)
    async with running_worker(client, settings, {"billing.issue_credit": tool.run}) as h:
        rep = await h.run(credit_plan(aid))
    assert rep.status == "succeeded", rep.escalation
    assert rep.plan_version == 1 and rep.replans_used == 0
    assert rep.step(1).state == "DONE"
    assert "reading the world by idempotency key" in rep.step(1).reason
    assert [c.phase for c in rep.step(1).checks] == ["skip+pre", "read-back", "post"]
    assert len(tool.keys) == 1  # never called again: the world said it was done
    assert (await scheduled(client, rep.run_id))["billing.issue_credit"] == 1
    assert [(a, to) for a, to, _ in await credits(pg, aid)] == [(612.4, "account")]
    # the record read back by key stands in for the lost answer: it is the credit in the table
    result = rep.step(1).result
    assert result is not None
    cur = await pg.execute("SELECT credit_id FROM demo.credits WHERE account_id = %s", (aid,))
    assert [(result["credit_id"],)] == await cur.fetchall()


async def test_a_call_that_never_acted_is_retried_with_the_same_key(client, settings, pg, world):
    aid = await closed_account(world)
    tool = CommitsThenDrops(world, acts=False, fail_times=1)
    async with running_worker(client, settings, {"billing.issue_credit": tool.run}) as h:
        rep = await h.run(credit_plan(aid))
    assert rep.status == "succeeded", rep.escalation
    assert len(tool.keys) == 2 and tool.keys[0] == tool.keys[1]
    assert (await attempts(client, rep.run_id))["billing.issue_credit"] == [1, 1]
    rows = await credits(pg, aid)
    assert len(rows) == 1 and rows[0][2] == tool.keys[0]


async def test_never_a_new_key_while_the_effect_may_exist(client, settings, pg, world):
    # The connection drops after every commit; the budget would allow two re-plans, and each
    # would bring a new key. The first credit is found instead, and nothing is re-planned.
    aid = await closed_account(world)
    tool = CommitsThenDrops(world)
    async with running_worker(client, settings, {"billing.issue_credit": tool.run}) as h:
        rep = await h.run(credit_plan(aid, replans_max=2))
    assert rep.replans_used == 0 and len(set(tool.keys)) == 1
    assert len(await credits(pg, aid)) == 1


async def test_a_reused_run_id_never_reuses_keys(client, settings, pg, world):
    aid = await closed_account(world)
    run_id = f"reused-{uuid.uuid4().hex[:8]}"
    async with running_worker(client, settings) as h:
        first = await h.run(credit_plan(aid), run_id=run_id)
        second = await h.run(credit_plan(aid), run_id=run_id)
    assert first.status == second.status == "succeeded"
    rows = await credits(pg, aid)
    assert len(rows) == 2  # two runs asked for two credits: neither passed for the other
    made = [k for _, _, k in rows]
    assert len(set(made)) == 2 and all(keys.of_workflow(k, run_id) and len(k) < 60 for k in made)


async def test_a_credit_found_in_suspense_halts_instead_of_replanning(
    client, settings, pg, world
):
    # The account is still open: the credit lands in suspense (seed 001). It exists, so a new
    # plan version could only add a second one: a person must look.
    aid = f"acct_{uuid.uuid4().hex[:8]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", status="active"))
    tool = CommitsThenDrops(world)
    async with running_worker(client, settings, {"billing.issue_credit": tool.run}) as h:
        rep = await h.run(credit_plan(aid, replans_max=2))
    assert rep.status == "halted" and rep.replans_used == 0
    assert rep.failure is not None and rep.failure.code == "postcondition_unmet"
    assert "suspense" in rep.failure.detail
    assert rep.step(2).state == "VOID"
    assert [(a, to) for a, to, _ in await credits(pg, aid)] == [(612.4, "suspense")]
    assert (await scheduled(client, rep.run_id)).get("email.send", 0) == 0
