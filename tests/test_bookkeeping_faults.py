"""plangate's own bookkeeping never fails a run (issue 47).

A run's last act is a bookkeeping write: its windows row (``windows.record``, a local activity).
Here it meets Postgres gone (every connection reset, or held: a partition longer than its
tries) or a bug of its own; the run still ends as its steps went, every step DONE, its effects in
the world once, and the row is written when Postgres answers again. The same for a call's
outcome in the effect ledger, and for an answer whose approvers cannot be listed
(``tests/test_outage_waits.py``: outages met before anything is sent).

The faults are real (``tests.fault_proxy``), injected at a chosen activity's point by an
interceptor on the worker (``tests.fault_points``)."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import replace
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.exceptions import ApplicationError

from plangate.activities.guarding import approver_keys
from plangate.client.answers import signed_answer
from plangate.client.api import Plangate
from plangate.demo.schema import Account, seed_account
from plangate.records.approvals import ApprovalDecision
from plangate.records.interface import (
    ANSWER_SIGNAL,
    APPROVERS_ACTIVITY,
    WINDOWS_ACTIVITY,
)
from plangate.records.report import RunReport
from plangate.records.run import Approvers, ApproversRequest
from plangate.records.windows import WindowsRow
from plangate.testing import history_events, running_worker, scheduled
from plangate.workflows.context import INDEX_PATCH
from plangate.world.clients import World
from tests.fault_points import FaultPoints, Kind, Point, When, through_proxy


def credits_plan(aid: str) -> dict[str, Any]:
    return {"goal": "two credits", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "billing.issue_credit", "args": {"account_id": aid, "amount_eur": 1.5}},
        {"n": 2, "tool": "billing.issue_credit", "depends_on": [1],
         "args": {"account_id": aid, "amount_eur": 2.5}},
    ]}


async def credits_of(world: World, aid: str) -> list[str]:
    async with (await world.pool()).connection() as conn:
        cur = await conn.execute("SELECT amount_eur::text FROM demo.credits WHERE account_id = "
                                 "%s ORDER BY 1", (aid,))
        return [r[0] for r in await cur.fetchall()]


async def windows_row(world: World, run_id: str, within_s: float) -> tuple[str, ...] | None:
    """The run's windows row (its status), waited for up to ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        async with (await world.pool()).connection() as conn:
            cur = await conn.execute(
                "SELECT status FROM plangate.windows WHERE workflow_id = %s", (run_id,))
            row = await cur.fetchone()
        if row is not None or time.monotonic() > deadline:
            return tuple(row) if row is not None else None
        await asyncio.sleep(0.5)


async def assert_done(client: Any, world: World, rep: RunReport, aid: str) -> None:
    assert rep.status == "succeeded", (rep.status, rep.escalation)
    assert [s.state for s in rep.steps] == ["DONE", "DONE"], rep.steps
    assert await credits_of(world, aid) == ["1.50", "2.50"]
    assert (await scheduled(client, rep.run_id))["billing.issue_credit"] == 2
    events = await history_events(client, rep.run_id)
    assert events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED


@pytest.mark.parametrize("kind", [Kind.RESET, Kind.HOLD])
async def test_a_runs_last_bookkeeping_write_meets_postgres_gone(client, settings, world, kind):
    """Postgres reset, or held (a partition: nothing answers) for 10 s, just as the run's
    windows row is written, longer than the write's tries. Before: the run failed with "server
    closed the connection unexpectedly" and ``plangate status`` showed its done steps VOID.
    Now: it ends succeeded without waiting for Postgres, and its row is written once
    Postgres is back, with the run's own end time."""
    aid = f"acct_bk{uuid.uuid4().hex[:6]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", status="closed"))
    async with through_proxy(settings) as p:
        gone = Point(WINDOWS_ACTIVITY, When.BEFORE, p.proxy, kind, 10.0)
        faults = FaultPoints(gone)
        try:
            async with running_worker(client, p.settings, world=p.world,
                                      interceptors=[faults]) as h:
                handle = await h.start(credits_plan(aid))
                rep = await handle.result()
                # the run ended while Postgres was still away: no row yet
                assert gone.hit == 1 and faults.active, "the run's end waited for Postgres"
                assert await windows_row(world, rep.run_id, 0) is None
                await faults.healed()
                row = await windows_row(world, rep.run_id, 60)
        finally:
            await faults.close()
    await assert_done(client, world, rep, aid)
    assert row == ("succeeded",)


class Broken:
    """A ``windows.record`` with a bug of its own: it raises whatever it is given."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    @activity.defn(name=WINDOWS_ACTIVITY)
    async def record(self, row: WindowsRow) -> None:
        self.calls += 1
        raise self.error


@pytest.mark.parametrize("error", [
    RuntimeError("a bug in the bookkeeping"),
    ApplicationError("refused for good", type="Broken", non_retryable=True),
], ids=["raises", "non-retryable"])
async def test_bookkeeping_that_raises_fails_no_run(client, settings, world, error):
    aid = f"acct_bb{uuid.uuid4().hex[:6]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", status="closed"))
    broken = Broken(error)
    async with running_worker(client, settings, {WINDOWS_ACTIVITY: broken.record}) as h:
        rep = await (await h.start(credits_plan(aid))).result()
    assert broken.calls == (1 if isinstance(error, ApplicationError) else 2)
    await assert_done(client, world, rep, aid)
    # the branch that keeps the run's end is the patched one (old histories replay as before):
    # the newest patch a run asks, issue 50's, implies it
    markers = [e for e in await history_events(client, rep.run_id)
               if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
               and INDEX_PATCH.encode() in e.SerializeToString()]
    assert len(markers) == 1


async def test_an_outcome_row_that_meets_postgres_gone_is_written_later(client, settings, s3):
    """Postgres reset for 5 s just after ``s3.put`` wrote its object, before the effect
    ledger took its outcome. The call stands (the object is there, the step DONE); the report
    says the outcome is owed rather than recorded; the row reads ``done`` once Postgres is
    back. Before: the report said "recorded" over a row left ``intent`` for good."""
    from plangate.activities.catalogue import catalogue
    from plangate.activities.extensions import registry_for
    from plangate.activities.policing import PolicyBook
    from plangate.activities.probe_activity import ProbeActivities
    from plangate.activities.tool_activity import _make

    bucket = f"owed-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    plan = {"goal": "write a note", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "args": {"bucket": bucket, "key": "n.txt", "body": "kept"}}]}
    async with through_proxy(settings) as p:
        resets: list[int] = []
        real = registry_for(p.settings.catalogue).tools["s3.put"]

        async def put_then_lose_postgres(args: Any, world: World, ctx: Any) -> Any:
            out = await real.fn(args, world, ctx)
            resets.append(p.proxy.reset())
            asyncio.get_running_loop().call_later(5.0, p.proxy.heal)
            return out

        spec = replace(real, fn=put_then_lose_postgres)
        book = PolicyBook(p.settings.policy, p.world.settings.scope,
                          catalogue(p.settings.catalogue))
        put = _make(spec, p.world, p.settings.policy,
                    ProbeActivities(p.world, p.settings.catalogue), book)
        try:
            async with running_worker(client, p.settings, {"s3.put": put},
                                      world=p.world) as h:
                rep = await (await h.start(plan)).result()
                link = rep.step(1).ledger
                assert link is not None and link.owed, link
                key = link.key
                settled = None
                for _ in range(120):  # the owed outcome, once Postgres answers
                    async with (await World(settings.world).pool()).connection() as conn:
                        cur = await conn.execute("SELECT state FROM plangate.effects WHERE "
                                                 "idempotency_key = %s", (key,))
                        settled = await cur.fetchone()
                    if settled == ("done",):
                        break
                    await asyncio.sleep(0.5)
        finally:
            p.proxy.heal()
    assert resets, "the tool never ran"
    assert rep.status == "succeeded" and rep.step(1).state == "DONE", rep.escalation
    assert s3.get_object(Bucket=bucket, Key="n.txt")["Body"].read() == b"kept"
    assert settled == ("done",)


async def test_an_answer_signal_whose_approvers_cannot_be_listed_fails_no_run(
    client, settings, world
):
    """An approval sent as a signal (a client that can only signal) is judged by the approvers
    the worker lists now (``guard.approvers``, a local activity). That listing failing, a
    signal handler's failure failed the whole run; now the answer is refused, recorded as such,
    and the same answer sent again is taken."""
    from plangate.records.run import Approvers

    aid = f"acct_sg{uuid.uuid4().hex[:6]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", status="closed"))
    plan = {"goal": "one credit", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "billing.issue_credit", "approval": "required",
         "args": {"account_id": aid, "amount_eur": 3.5}}]}
    listed: list[int] = []

    @activity.defn(name=APPROVERS_ACTIVITY)
    async def approvers(req: ApproversRequest) -> Approvers:
        listed.append(1)
        if len(listed) == 1:
            raise ApplicationError("the listing broke", type="Broken", non_retryable=True)
        return Approvers(approvers=approver_keys(settings.policy))

    async with running_worker(client, settings, {APPROVERS_ACTIVITY: approvers}) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(plan)
        card = await api.wait_for_card(run_id, timeout=60)
        answer = signed_answer(h.settings, run_id, card.step, card.digest, ApprovalDecision.APPROVE,
                               "ok", by="", at=None)
        handle = client.get_workflow_handle(run_id)
        await handle.signal(ANSWER_SIGNAL, answer)
        for _ in range(100):  # refused, recorded
            rep = await api.report(run_id)
            if rep.refused_answers:
                break
            await asyncio.sleep(0.1)
        assert rep.refused_answers[0].why.startswith(
            "the approvers could not be listed now"), rep.refused_answers
        await handle.signal(ANSWER_SIGNAL, answer)
        rep = await api.result(run_id)
    assert rep.status == "succeeded", (rep.status, rep.escalation)
    assert await credits_of(world, aid) == ["3.50"]
