"""Faults where the first actor is not gone (issue 24; ``tests/fault_harness.py``).

A worker paused (SIGSTOP: a GC pause, a VM migration) in the middle of a credit, for longer than
the call's heartbeat timeout: the credit is done on another worker, and when the first one wakes
its late call can no longer act. Postgres ended its transaction while it slept
(``world.clients.PG_IDLE_IN_TRANSACTION``); before that setting, the paused transaction's locks
kept the second worker from even starting (its schema's DDL waited behind them)."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from plangate.client.connection import connect
from plangate.demo.schema import Account, seed_account
from plangate.dev._stack import choose_port
from plangate.dev._stack._temporal import TemporalDevServer
from plangate.records.calls import Outcome
from plangate.records.report import Phase
from plangate.testing import ended, history_events, running_worker, scheduled
from tests.crash_harness import CrashHarness, credit_in_flight
from tests.fault_harness import PauseConfig, _backends, _transactions, pause_run
from tests.fault_points import through_proxy
from tests.heartbeat import BEAT_ENV, BEAT_S


async def test_a_paused_worker_wakes_after_its_credit_was_done_elsewhere(
    client, settings, stack, s3, tmp_path
):
    harness = CrashHarness(client, settings, {**stack.env(), **BEAT_ENV}, tmp_path)
    out = await pause_run(harness, PauseConfig(), s3)
    result = out.crash
    report = "\n".join(result.lines()) + (
        f"\nheld: {out.held} xids {out.xids}; ended by Postgres: {out.ended_by_postgres}; "
        f"second worker ready {out.second_ready_s:.1f} s after the pause; paused "
        f"{out.paused_s:.1f} s; credits by the paused transactions: {out.late_credits}")
    print(report)
    assert out.held and out.xids, report
    # the pause outlasted the workers' heartbeat timeout, and the runs ended while it lasted
    assert out.paused_s > BEAT_S, report
    assert not result.unfinished and all(r.status.final for r in result.reports.values()), report
    # the paused credit's call timed out; its outcome was read back by key (absent: the paused
    # transaction never committed) and the credit was made by the second worker
    assert result.history["activity timed out"] >= 1, report
    assert result.read_backs()["absent"] >= 1, report
    # Postgres ended the paused transaction before the worker woke; it wrote nothing
    assert out.ended_by_postgres == out.held, report
    assert out.late_credits == 0, report
    # one effect a step in the world, none lost, no person needed
    assert len(result.counts) == sum(len(p.expected) for p in result.plans)
    assert not result.duplicates and not result.stray and not result.lost, report
    assert not result.halted, report


@pytest.mark.parametrize("fault", ["hold", "reset"])
async def test_a_partition_from_postgres_during_a_credit(client, settings, world, fault):
    """The worker reaches Postgres through a proxy that, with a credit in flight (its ``FOR
    SHARE`` sent and granted), either stops delivering anything either way (``hold``: the request
    landed, its answer never comes; Postgres ends the quiet transaction) or tears every connection
    down and refuses new ones (``reset``: Postgres ends the transaction of a connection it lost),
    for a while. When the network heals, the worker reads the credit back by key (absent: while
    it could not, the step waited for Postgres) and makes it again."""
    aid = f"acct_part{uuid.uuid4().hex[:6]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", status="closed"))
    plan = {"goal": "credit through a partition", "steps": [
        {"n": 1, "tool": "billing.issue_credit", "args": {"account_id": aid, "amount_eur": 12.5}},
        {"n": 2, "tool": "email.send", "depends_on": [1],
         "args": {"to": f"ar@{aid}.example", "template": "crash_notice", "account_id": aid}},
    ]}
    direct = settings.world.database_url
    async with through_proxy(settings) as p, \
            running_worker(client, p.settings, world=p.world) as h:
        handle = await h.start(plan)
        async with credit_in_flight(direct, lambda: [aid], 30) as held:
            assert held, "no credit came"
            if fault == "hold":
                p.proxy.hold()
            else:
                p.proxy.reset()
        xids = await _transactions(direct, held)
        # Postgres ends the transaction whose answer cannot be delivered
        for _ in range(300):
            if not set(held) & await _backends(direct):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the partitioned transaction was never ended")
        await asyncio.sleep(3)  # the worker meanwhile finds Postgres unreachable
        p.proxy.heal()
        rep = await ended(handle)
    assert rep.status == "succeeded", rep.escalation
    assert rep.replans_used == 0 and not rep.approvals
    async with (await world.pool()).connection() as conn:
        c = await conn.execute(
            "SELECT amount_eur::text, xmin::text FROM demo.credits WHERE account_id = %s", (aid,))
        credits = await c.fetchall()
        c = await conn.execute("SELECT count(*) FROM demo.outbox WHERE account_id = %s", (aid,))
        mails = await c.fetchone()
    assert [amt for amt, _ in credits] == ["12.50"]  # one credit
    assert not {x for _, x in credits} & set(xids)  # not the partitioned transaction's
    assert mails == (1,)
    # the first call failed when the network healed; read back by key (absent), made again
    read_backs = [c for c in rep.step(1).checks if c.phase == Phase.READ_BACK]
    outcomes = [c.results[0].outcome for c in read_backs]
    assert outcomes[-1] == Outcome.VIOLATED, outcomes
    # reset: the first reads found Postgres unreachable (the step waited); hold: healed by then
    unanswered = outcomes[:-1]
    assert set(unanswered) <= {Outcome.UNKNOWN}, outcomes
    assert bool(unanswered) == (fault == "reset"), outcomes
    assert (await scheduled(client, rep.run_id))["billing.issue_credit"] == 2


async def test_the_temporal_server_killed_and_restarted_mid_run(settings, world, tmp_path):
    """A Temporal dev server of the test's own is killed (SIGKILL) while a credit is in flight
    and started again on its state: the worker and the client reconnect, the run finishes, and
    every credit and e-mail is in the world once."""
    aid = f"acct_tr{uuid.uuid4().hex[:6]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", status="closed"))
    steps: list[dict[str, Any]] = []
    for n in range(1, 7):
        step: dict[str, Any] = {"n": n, "depends_on": [n - 1]} if n > 1 else {"n": n}
        if n % 2:
            step |= {"tool": "billing.issue_credit",
                     "args": {"account_id": aid, "amount_eur": float(f"{n}.25")}}
        else:
            step |= {"tool": "email.send", "args": {
                "to": f"step{n}@{aid.replace('_', '-')}.example", "template": "crash_notice",
                "account_id": aid}}
        steps.append(step)
    plan = {"goal": "credits and e-mails across a server restart", "steps": steps}
    server = TemporalDevServer(
        port=choose_port("Temporal", None, fallback=True), ui_port=None,
        db_file=tmp_path / "temporal.db", log_file=tmp_path / "temporal.log",
        namespace=settings.temporal.namespace,
    )
    await server.start()
    try:
        own = replace(settings, temporal=replace(settings.temporal, address=server.address))
        client = await connect(own)
        async with running_worker(client, own) as h:
            handle = await h.start(plan)
            direct = settings.world.database_url
            async with credit_in_flight(direct, lambda: [aid], 30) as held:
                assert held, "no credit came"
                await asyncio.to_thread(server.kill)
            # the row let go with the server down: the credit commits, its answer waits
            await asyncio.sleep(3)
            await server.start()
            rep = await ended(handle)
            events = await history_events(client, rep.run_id)
            calls = await scheduled(client, rep.run_id)
    finally:
        await asyncio.to_thread(server.stop)
    assert rep.status == "succeeded", rep.escalation
    assert rep.replans_used == 0 and not rep.approvals
    # done, or (a call whose answer was lost with the server) read back by key and found done
    assert all(s.state in ("DONE", "SKIPPED") for s in rep.steps), rep.steps
    async with (await world.pool()).connection() as conn:
        c = await conn.execute(
            "SELECT amount_eur::text FROM demo.credits WHERE account_id = %s ORDER BY 1", (aid,))
        credits = [r[0] for r in await c.fetchall()]
        c = await conn.execute(
            "SELECT to_address FROM demo.outbox WHERE account_id = %s ORDER BY 1", (aid,))
        mails = [r[0] for r in await c.fetchall()]
    assert credits == ["1.25", "3.25", "5.25"]
    assert mails == sorted(f"step{n}@{aid.replace('_', '-')}.example" for n in (2, 4, 6))
    # one call a step: the answer owed when the server died was given once it was back
    assert calls["billing.issue_credit"] == 3 and calls["email.send"] == 3, calls
    # the history survived the kill: the run's start is the first of its events
    assert events[0].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    assert not [e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs: a work directory that fills up."""
    where = tmp_path / "small"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"a tmpfs could not be mounted here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


async def test_a_full_disk_leaves_no_partial_file_taken_as_done(client, settings, s3,
                                                                small_disk):
    """``s3.get`` of a 3 MiB object into a 1 MiB work directory: the write fails part way, and
    no file is left under the name (nor a part file beside it) that the step's post condition
    (the file non-empty) or the next step could take for the object."""
    bucket = f"disk-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="big.bin", Body=b"x" * (3 << 20))
    plan = {"goal": "fetch then upload", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.get", "args": {"bucket": bucket, "key": "big.bin",
                                            "dest": "big.bin"}},
        {"n": 2, "tool": "s3.put", "depends_on": [1],
         "args": {"bucket": bucket, "key": "copy.bin", "source": "big.bin"}},
    ]}
    own = replace(settings, world=replace(settings.world, workdir=small_disk))
    async with running_worker(client, own) as h:
        rep = await h.run(plan)
    assert rep.status != "succeeded"
    # named for what it is, not an internal error: the step fails, the rest is void
    assert rep.failure is not None and rep.failure.code == "no_space", rep.failure
    assert rep.step(1).state not in ("DONE", "SKIPPED"), rep.step(1)
    assert (await scheduled(client, rep.run_id))["s3.put"] == 0  # the upload never ran
    assert [p.name for p in small_disk.rglob("*") if p.is_file()] == []
    assert "copy.bin" not in {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get(
        "Contents", [])}


def test_a_session_postgres_ended_for_going_quiet_is_an_outage_not_a_refusal():
    """What a worker paused or partitioned inside a transaction meets when it speaks again
    (found by bench.faults: a credit halted ``invalid_state``): its transaction rolled back,
    so the call's outcome is read back by key, as after any lost connection."""
    import psycopg

    from plangate.world.outages import unreachable
    from plangate.world.pg import to_tool_error

    quiet = psycopg.errors.IdleInTransactionSessionTimeout(
        "terminating connection due to idle-in-transaction timeout")
    err = to_tool_error(quiet, "credit")
    assert err.code == "unavailable"
    try:
        raise err from quiet
    except Exception as raised:
        assert unreachable(raised)
