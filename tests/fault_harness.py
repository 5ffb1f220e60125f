"""Faults where the first actor is not gone (issue 24): a worker paused in the middle of a money
step, past its heartbeat timeout, that wakes after another worker has done the step.

Built on the crash harness (``tests/crash_harness.py``): the same seeded plans of credits,
e-mails and conditional S3 writes, the same ``plangate worker`` processes, the same count of the
world per step by what identifies each effect. ``tests/test_faults.py`` runs it.
"""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import psycopg

from plangate.activities.bootstrap import ensure_schema
from plangate.records.report import RunReport
from plangate.world.clients import World
from tests.crash_harness import (
    CrashConfig,
    CrashHarness,
    CrashResult,
    WorkerProcess,
    _result,
    credit_in_flight,
    make_plan,
    seed_plan,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


@dataclass(frozen=True)
class PauseConfig:
    seed: int = 24
    plans: int = 2
    steps: int = 6
    kinds: tuple[tuple[str, int], ...] = (("credit", 2), ("email", 1))
    aim_within_s: float = 30.0
    settle_s: float = 120.0  # the runs' end on the second worker, the first one still paused
    wake_s: float = 5.0  # how long the paused worker runs after SIGCONT before it is stopped


@dataclass
class PauseResult:
    crash: CrashResult  # the plans, their reports, the world's count per step
    held: list[int] = field(default_factory=list)  # backends of the paused worker's credits
    xids: list[str] = field(default_factory=list)  # their transactions
    ended_by_postgres: list[int] = field(default_factory=list)  # held backends gone before SIGCONT
    second_ready_s: float = 0.0  # the second worker's start, from the pause
    paused_s: float = 0.0
    late_credits: int = 0  # credits written by the paused worker's transactions


async def pause_run(h: CrashHarness, cfg: PauseConfig, s3: S3Client) -> PauseResult:
    """Worker A runs the plans until one of their credits is in flight (its ``FOR SHARE``
    waits for a row the harness holds), and is stopped (SIGSTOP) there; the row is let go, so
    the credit's transaction goes on in Postgres and then waits, holding its locks, for a worker
    that cannot answer. Worker B starts; the runs end on it (the credit's call times out at its
    heartbeat and is done again). Only then is A woken (SIGCONT), and stopped a little later."""
    crash = CrashResult(CrashConfig(seed=cfg.seed, kills=0, plans=cfg.plans, steps=cfg.steps,
                                    kinds=cfg.kinds))
    out = PauseResult(crash)
    url = h.settings.world.database_url
    world = World(h.settings.world)
    runs: dict[str, asyncio.Task[RunReport]] = {}
    try:
        await ensure_schema(world, h.settings.catalogue)
        await asyncio.to_thread(h._bucket, s3)
        for i in range(cfg.plans):
            plan = make_plan(cfg.seed, i, cfg.steps, h.bucket, h.tag, cfg.kinds)
            crash.plans.append(plan)
            await seed_plan(world, s3, h.bucket, plan)
    finally:
        await world.close()
    log = (h.log_dir / f"pause-{h.tag}-workers.log").open("a")
    a, b = WorkerProcess(h.env, log), WorkerProcess(h.env, log)
    t0 = time.monotonic()
    try:
        await a.start()
        for plan in crash.plans:
            handle = await h.api.submit(plan.body, run_id=plan.run_id)
            runs[plan.run_id] = asyncio.create_task(_result(handle))
        accounts = [p.account_id for p in crash.plans]
        async with credit_in_flight(url, lambda: accounts, cfg.aim_within_s) as held:
            if not held:
                raise AssertionError(f"no credit came within {cfg.aim_within_s} s")
            assert a.proc is not None
            a.proc.send_signal(signal.SIGSTOP)
            paused_at = time.monotonic()
            out.held = held
        out.xids = await _transactions(url, out.held)
        await b.start()
        out.second_ready_s = time.monotonic() - paused_at
        _, late = await asyncio.wait(list(runs.values()), timeout=cfg.settle_s)
        for t in late:
            t.cancel()
        out.ended_by_postgres = [p for p in out.held if p not in await _backends(url)]
        out.paused_s = time.monotonic() - paused_at
        a.proc.send_signal(signal.SIGCONT)
        await asyncio.sleep(cfg.wake_s)
    finally:
        if a.proc is not None and a.proc.returncode is None:
            a.proc.send_signal(signal.SIGCONT)
        await a.kill(signal.SIGTERM)
        await b.kill(signal.SIGTERM)
        log.close()
    crash.wall_s = time.monotonic() - t0
    await h._collect(crash, runs)
    await h._count(crash, s3)
    out.late_credits = await _written_by(url, out.xids)
    return out


async def _transactions(url: str, pids: list[int]) -> list[str]:
    """The transaction ids of ``pids``' open transactions (a row lock gives one)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as pg:
        for _ in range(50):
            cur = await pg.execute(
                "SELECT backend_xid::text FROM pg_stat_activity "
                "WHERE pid = ANY(%s) AND backend_xid IS NOT NULL", (pids,))
            if xids := [r[0] for r in await cur.fetchall()]:
                return xids
            await asyncio.sleep(0.1)
    return []


async def _backends(url: str) -> set[int]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as pg:
        cur = await pg.execute("SELECT pid FROM pg_stat_activity")
        return {int(r[0]) for r in await cur.fetchall()}


async def _written_by(url: str, xids: list[str]) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as pg:
        cur = await pg.execute(
            "SELECT count(*) FROM demo.credits WHERE xmin::text = ANY(%s)", (xids,))
        row = await cur.fetchone()
        return int(row[0]) if row else 0
