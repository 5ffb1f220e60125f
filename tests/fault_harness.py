"""Faults where the first actor is not gone (issue 24): a worker paused in the middle of a money
step, past its heartbeat timeout, that wakes after another worker has done the step.

Built on the crash harness (``tests/crash_harness.py``): the same seeded plans of credits,
e-mails and conditional S3 writes, the same ``plangate worker`` processes, the same count of the
world per step by what identifies each effect. ``tests/test_faults.py`` runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from urllib.parse import urlsplit, urlunsplit

import psycopg
from temporalio.client import Client

from plangate.activities.bootstrap import ensure_schema
from plangate.dev.stack import EmbeddedStack
from plangate.records.report import RunReport
from plangate.testing import Harness, ended
from plangate.world.clients import World
from plangate.world.settings import Settings
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
from tests.fault_proxy import FaultProxy
from tests.inputs import after, staged

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


# -- the mix: pauses, partitions and restarts under concurrent plans (bench/faults.py) --------
SYSTEMS = ("postgres", "s3", "temporal")


@dataclass(frozen=True)
class MixConfig:
    seed: int = 24
    workers: int = 3  # plangate worker processes, each behind proxies of its own
    plans: int = 3  # at least this many; more are started while faults remain
    concurrency: int = 6  # plans running at once
    steps: int = 10
    pauses: int = 2  # SIGSTOP of a worker past the heartbeat timeout, then SIGCONT
    partitions: int = 1  # of a worker from each system (held or reset, then healed)
    restarts: int = 1  # kill -9 of the Temporal server, started again on its state
    gap_s: tuple[float, float] = (1.0, 4.0)  # from one fault's start to the next one's
    pause_s: tuple[float, float] = (35.0, 45.0)  # past the 30 s heartbeat timeout
    partition_s: tuple[float, float] = (3.0, 40.0)
    down_s: tuple[float, float] = (1.0, 5.0)  # the Temporal server's time down
    settle_s: float = 900.0  # after the last fault, the longest the runs may take to end


@dataclass
class MixResult:
    crash: CrashResult
    faults: Counter[str] = field(default_factory=Counter)  # injected, by kind
    worker_exits: list[str] = field(default_factory=list)  # workers that ended by themselves
    faults_s: float = 0.0

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.faults.items()))
        out = [f"faults: {sum(self.faults.values())} over {self.faults_s:.0f} s ({kinds})",
               f"workers that ended by themselves (started again): {len(self.worker_exits)}"]
        out += [f"  {w}" for w in self.worker_exits]
        return out + [ln for ln in self.crash.lines() if not ln.startswith(("kills", "wall"))] + [
            f"wall time: {self.crash.wall_s:.0f} s"]


def _with_port(url: str, port: int) -> str:
    parts = urlsplit(url)
    host = f"{parts.hostname}:{port}"
    if parts.username:
        auth = parts.username + (f":{parts.password}" if parts.password else "")
        host = f"{auth}@{host}"
    return urlunsplit(parts._replace(netloc=host))


class Member:
    """One worker process, reaching Postgres, S3 and Temporal through proxies of its own."""

    def __init__(self, name: str, env: Mapping[str, str], log: TextIO) -> None:
        self.name, self.base, self.log = name, dict(env), log
        self.proxies: dict[str, FaultProxy] = {}
        self.worker: WorkerProcess | None = None
        self.faulted = False

    async def start(self) -> None:
        e = self.base
        pg = urlsplit(e["PLANGATE_DATABASE_URL"]).port
        s3 = urlsplit(e["PLANGATE_S3_ENDPOINT_URL"]).port
        temporal = int(e["TEMPORAL_ADDRESS"].rsplit(":", 1)[1])
        for system, port in zip(SYSTEMS, (pg, s3, temporal), strict=True):
            assert port is not None
            self.proxies[system] = await FaultProxy(port).start()
        self.env = {
            **e,
            "PLANGATE_DATABASE_URL": _with_port(e["PLANGATE_DATABASE_URL"],
                                                self.proxies["postgres"].port),
            "PLANGATE_S3_ENDPOINT_URL": _with_port(e["PLANGATE_S3_ENDPOINT_URL"],
                                                   self.proxies["s3"].port),
            "TEMPORAL_ADDRESS": f"127.0.0.1:{self.proxies['temporal'].port}",
        }
        await self.spawn()

    async def spawn(self) -> None:
        self.worker = WorkerProcess(self.env, self.log)
        await self.worker.start()

    @property
    def alive(self) -> bool:
        w = self.worker
        return w is not None and w.proc is not None and w.proc.returncode is None

    async def stop(self) -> None:
        if self.worker is not None and self.worker.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.worker.proc.send_signal(signal.SIGCONT)
            await self.worker.kill(signal.SIGTERM)
        for p in self.proxies.values():
            await p.stop()


class FaultMix(CrashHarness):
    """Concurrent crash-harness plans on ``MixConfig.workers`` worker processes while pauses,
    partitions (of one worker from one system) and Temporal restarts are injected, seeded, at
    most ``workers - 1`` workers faulted at once; then the world is counted per step."""

    def __init__(self, stack: EmbeddedStack, client: Client, settings: Settings,
                 log_dir: Path) -> None:
        super().__init__(client, settings, stack.env(), log_dir)
        self.stack = stack

    async def mix(self, cfg: MixConfig, s3: S3Client) -> MixResult:
        crash = CrashResult(CrashConfig(seed=cfg.seed, kills=0, plans=cfg.plans,
                                        steps=cfg.steps))
        out = MixResult(crash)
        world = World(self.settings.world)
        runs: dict[str, asyncio.Task[RunReport]] = {}
        faults_done = asyncio.Event()
        log = (self.log_dir / f"faults-{self.tag}-workers.log").open("a")
        members = [Member(f"worker {i}", self.env, log) for i in range(cfg.workers)]
        t0 = time.monotonic()
        tasks: list[asyncio.Task[None]] = []
        try:
            await ensure_schema(world, self.settings.catalogue)
            await asyncio.to_thread(self._bucket, s3)
            for m in members:
                await m.start()

            async def submit() -> None:
                plan = make_plan(cfg.seed, len(crash.plans), cfg.steps, self.bucket, self.tag)
                crash.plans.append(plan)
                await seed_plan(world, s3, self.bucket, plan)
                handle = await self.api.submit(plan.body, run_id=plan.run_id)
                runs[plan.run_id] = asyncio.create_task(_result(handle))

            async def top_up() -> None:
                while not faults_done.is_set() or len(crash.plans) < cfg.plans:
                    if sum(not t.done() for t in runs.values()) < cfg.concurrency:
                        try:
                            await submit()
                        except Exception:  # the server may be down: a client retries
                            await asyncio.sleep(1)
                    else:
                        await asyncio.sleep(0.2)

            async def watch() -> None:  # a worker that ended by itself is started again
                while True:
                    await asyncio.sleep(1)
                    for m in members:
                        if not m.alive and not m.faulted:
                            code = m.worker.proc.returncode if m.worker and m.worker.proc else None
                            out.worker_exits.append(
                                f"{m.name}: exit {code} at {time.monotonic() - t0:.0f} s")
                            with contextlib.suppress(Exception):
                                await m.spawn()

            feeder = asyncio.create_task(top_up())
            watcher = asyncio.create_task(watch())
            tasks = await self._inject(cfg, out, members)
            await asyncio.gather(*tasks)
            out.faults_s = time.monotonic() - t0
            faults_done.set()
            await feeder
            _, late = await asyncio.wait(list(runs.values()), timeout=cfg.settle_s)
            for t in late:
                t.cancel()
            watcher.cancel()
        finally:
            for task in tasks:
                task.cancel()
            for m in members:
                await m.stop()
            log.close()
            await world.close()
        crash.wall_s = time.monotonic() - t0
        await self._collect(crash, runs)
        await self._count(crash, s3)
        return out

    async def _inject(self, cfg: MixConfig, out: MixResult, members: list[Member]
                      ) -> list[asyncio.Task[None]]:
        rng = random.Random(f"faults/{cfg.seed}")
        todo = (["pause"] * cfg.pauses + [s for s in SYSTEMS for _ in range(cfg.partitions)]
                + ["restart"] * cfg.restarts)
        rng.shuffle(todo)
        tasks: list[asyncio.Task[None]] = []
        restarting = asyncio.Lock()
        for kind in todo:
            await asyncio.sleep(rng.uniform(*cfg.gap_s))
            if kind == "restart":
                async with restarting:  # one restart at a time; none overlap
                    pass
                tasks.append(asyncio.create_task(self._restart(rng.uniform(*cfg.down_s),
                                                               restarting, out)))
                continue
            while True:  # a worker with no fault on it, leaving one that has none
                free = [m for m in members if not m.faulted and m.alive]
                if len(free) >= 2:
                    break
                await asyncio.sleep(0.5)
            m = rng.choice(free)
            m.faulted = True
            if kind == "pause":
                d = rng.uniform(*cfg.pause_s)
                tasks.append(asyncio.create_task(self._pause(m, d, out)))
            else:
                mode = rng.choice(("hold", "reset"))
                d = rng.uniform(*cfg.partition_s)
                tasks.append(asyncio.create_task(self._partition(m, kind, mode, d, out)))
        return tasks

    async def _pause(self, m: Member, seconds: float, out: MixResult) -> None:
        assert m.worker is not None and m.worker.proc is not None
        try:
            m.worker.proc.send_signal(signal.SIGSTOP)
            out.faults["pause"] += 1
            await asyncio.sleep(seconds)
        finally:
            with contextlib.suppress(ProcessLookupError):
                m.worker.proc.send_signal(signal.SIGCONT)
            m.faulted = False

    async def _partition(self, m: Member, system: str, mode: str, seconds: float,
                         out: MixResult) -> None:
        proxy = m.proxies[system]
        try:
            if mode == "hold":
                proxy.hold()
            else:
                proxy.reset()
            out.faults[f"partition {system} ({mode})"] += 1
            await asyncio.sleep(seconds)
        finally:
            proxy.heal()
            m.faulted = False

    async def _restart(self, down: float, lock: asyncio.Lock, out: MixResult) -> None:
        async with lock:
            await self.stack.stop_service("temporal", kill=True)
            out.faults["temporal restart"] += 1
            await asyncio.sleep(down)
            await self.stack.start_service("temporal")


# -- Postgres killed in the middle of loads (bench/faults.py --loads) ---------------------------
@dataclass
class LoadsResult:
    loads: int = 0
    killed_in_copy: int = 0  # Postgres killed while the load's COPY ran
    missed: int = 0  # loads that ended before their COPY was seen
    partial: list[str] = field(default_factory=list)  # a table neither before nor after
    unfinished: list[str] = field(default_factory=list)  # runs that did not succeed
    wrong_end: list[str] = field(default_factory=list)  # tables not holding the new load at the end

    def lines(self) -> list[str]:
        out = [f"loads: {self.loads}; Postgres killed (SIGKILL of the COPY's backend: a crash "
               f"and recovery of the whole server) in {self.killed_in_copy}, missed "
               f"{self.missed}",
               f"tables holding a partial load right after the crash: {len(self.partial)}; "
               f"runs not succeeded: {len(self.unfinished)}; tables without the new load at "
               f"the end: {len(self.wrong_end)}"]
        return out + [f"  {x}" for x in self.partial + self.unfinished + self.wrong_end]


async def loads_killed(h: Harness, s3: S3Client, n: int, rows: int, seed: int) -> LoadsResult:
    """``n`` runs each loading ``rows`` new rows over a table that holds 10 old ones; while a
    load's COPY runs, its backend is killed with SIGKILL (Postgres then ends every session and
    recovers). Right after the recovery the table must hold the 10 old rows (or, the load done
    again already, all of the new ones), never part of the new ones; at the end, the run
    succeeded and the table holds the new rows."""
    out = LoadsResult()
    url = h.settings.world.database_url
    rng = random.Random(f"loads/{seed}")
    tag = f"{rng.getrandbits(32):08x}"
    for i in range(n):
        table = f"public.faultload_{tag}_{i}"
        name = f"faultload_{tag}_{i}"
        source = f"loads/{name}.csv"  # fetched by the run's first step into its directory
        fetch = staged(s3, source, "id,label\n" + "".join(f"{k},new-{i}-{k}\n"
                                                          for k in range(rows)))
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as pg:
            await pg.execute(f"CREATE TABLE {name} (id int, label text)")
            await pg.execute(f"INSERT INTO {name} SELECT k, 'old' FROM generate_series(1, 10) k")
        plan = {"goal": f"load {i}", "steps": after(fetch, {"tool": "warehouse.load", "args": {
            "target": table, "source": source}})}
        handle = await h.start(plan)
        out.loads += 1
        pid = await _copy_backend(url, name, within_s=30)
        if pid is None:
            out.missed += 1
        else:
            await asyncio.sleep(rng.uniform(0.0, 0.2))  # somewhere in the COPY
            os.kill(pid, signal.SIGKILL)
            out.killed_in_copy += 1
            held = await _rows(url, name)  # once Postgres has recovered
            # the old rows, or (the load retried already) the whole new load; never a part
            if held not in ((10, "old"), (rows, f"new-{i}-0")):
                out.partial.append(f"{table}: {held} right after the crash")
        rep = await ended(handle)
        if rep.status != "succeeded":
            out.unfinished.append(f"{rep.run_id}: {rep.status} {rep.failure}")
        end = await _rows(url, name)
        if end[0] != rows or end[1] != f"new-{i}-0":
            out.wrong_end.append(f"{table}: {end} at the end")
    return out


async def _copy_backend(url: str, table: str, within_s: float) -> int | None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as pg:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            cur = await pg.execute(
                "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query ILIKE %s",
                (f"COPY %{table}%",))
            if row := await cur.fetchone():
                return int(row[0])
            cur = await pg.execute(f"SELECT count(*) FROM {table} WHERE label <> 'old'")
            done = await cur.fetchone()
            if done and done[0]:
                return None  # committed before it was seen
            await asyncio.sleep(0.01)
    return None


async def _rows(url: str, table: str) -> tuple[int, str]:
    """The table's row count and its smallest label, once Postgres answers again."""
    for _ in range(300):
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as pg:
                cur = await pg.execute(f"SELECT count(*), min(label) FROM {table}")
                row = await cur.fetchone()
                return (int(row[0]), str(row[1])) if row else (0, "")
        except psycopg.OperationalError:  # recovering
            await asyncio.sleep(0.1)
    raise RuntimeError("Postgres did not come back within 30 s")
