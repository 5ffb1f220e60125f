"""Faults where the first actor is not gone (issue 24; ``tests/fault_harness.py``).

A worker paused (SIGSTOP: a GC pause, a VM migration) in the middle of a credit, for longer than
the call's heartbeat timeout: the credit is done on another worker, and when the first one wakes
its late call can no longer act. Postgres ended its transaction while it slept
(``world.clients.PG_IDLE_IN_TRANSACTION``); before that setting, the paused transaction's locks
kept the second worker from even starting (its schema's DDL waited behind them)."""

from __future__ import annotations

from tests.crash_harness import CrashHarness
from tests.fault_harness import PauseConfig, pause_run


async def test_a_paused_worker_wakes_after_its_credit_was_done_elsewhere(
    client, settings, stack, s3, tmp_path
):
    harness = CrashHarness(client, settings, stack.env(), tmp_path)
    out = await pause_run(harness, PauseConfig(), s3)
    result = out.crash
    report = "\n".join(result.lines()) + (
        f"\nheld: {out.held} xids {out.xids}; ended by Postgres: {out.ended_by_postgres}; "
        f"second worker ready {out.second_ready_s:.1f} s after the pause; paused "
        f"{out.paused_s:.1f} s; credits by the paused transactions: {out.late_credits}")
    print(report)
    assert out.held and out.xids, report
    # the pause outlasted the heartbeat timeout, and the runs ended while it lasted
    assert out.paused_s > 30, report
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
