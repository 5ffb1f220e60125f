"""Faults at a chosen point of a run (issue 47): an interceptor on the worker that, when an
activity or local activity of a named type runs, breaks the network between the worker and one
of its systems (a ``FaultProxy``: held, or every connection reset) just before the activity's
code runs or just after it returns (its effect made, its answer not yet given), and heals it
after a while of the test's choosing.

The faults are real (sockets reset or held by the proxy); only the moment is chosen here.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from temporalio import activity
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from plangate.activities.bootstrap import ensure_schema
from plangate.records.report import RunReport, RunStatus, StepState
from plangate.world.clients import World
from plangate.world.owed import owed
from plangate.world.settings import Settings
from tests.crash_harness import (
    CrashConfig,
    CrashHarness,
    CrashPlan,
    CrashResult,
    Expected,
    StepCount,
    WorkerProcess,
    _result,
    seed_plan,
)
from tests.fault_proxy import FaultProxy

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class When(StrEnum):
    BEFORE = "before"  # the network breaks, then the activity's code runs
    AFTER = "after"  # the activity's code returns (its effect made), then the network breaks


class Kind(StrEnum):
    HOLD = "hold"
    RESET = "reset"


@dataclass(frozen=True)
class Fault:
    """What the network does, to which system, for how long."""

    system: str  # postgres | s3 | temporal
    proxy: FaultProxy
    kind: Kind
    for_s: float


@dataclass(frozen=True)
class Injected:
    activity: str
    when: When
    system: str
    kind: Kind
    for_s: float


Decide = Callable[[str, When, frozenset[str]], Fault | None]  # busy: the systems faulted now


@dataclass
class Point:
    """At the ``times`` first runs of ``activity`` (``when``), ``kind`` on ``proxy`` for
    ``for_s`` seconds."""

    activity: str
    when: When
    proxy: FaultProxy
    kind: Kind
    for_s: float
    times: int = 1
    system: str = "postgres"
    hit: int = 0

    def __call__(self, name: str, when: When, busy: frozenset[str]) -> Fault | None:
        if name != self.activity or when is not self.when or self.hit >= self.times \
                or self.system in busy:
            return None
        self.hit += 1
        return Fault(self.system, self.proxy, self.kind, self.for_s)


class FaultPoints(Interceptor):
    """Asks ``decide`` at each point (an activity's type, before or after its code) whether
    a fault begins there; one fault at a time on each system. ``injected``: every fault, in
    order."""

    def __init__(self, *decide: Decide) -> None:
        self.decide = list(decide)
        self.injected: list[Injected] = []
        self.active: dict[str, Fault] = {}
        self._heals: set[asyncio.Task[None]] = set()

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _AtCall(next, self)

    def inject(self, name: str, when: When) -> None:
        for d in self.decide:
            fault = d(name, when, frozenset(self.active))
            if fault is None:
                continue
            self.active[fault.system] = fault
            self.injected.append(Injected(name, when, fault.system, fault.kind, fault.for_s))
            if fault.kind is Kind.HOLD:
                fault.proxy.hold()
            else:
                fault.proxy.reset()
            task = asyncio.create_task(self._heal(fault))
            self._heals.add(task)
            task.add_done_callback(self._heals.discard)
            return

    async def _heal(self, fault: Fault) -> None:
        try:
            await asyncio.sleep(fault.for_s)
        finally:
            fault.proxy.heal()
            self.active.pop(fault.system, None)

    async def healed(self) -> None:
        """Every fault begun is over."""
        while self._heals:
            await asyncio.gather(*list(self._heals), return_exceptions=True)

    async def close(self) -> None:
        for t in list(self._heals):
            t.cancel()
        await self.healed()


class _AtCall(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, points: FaultPoints) -> None:
        super().__init__(next)
        self.points = points

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        name = activity.info().activity_type
        self.points.inject(name, When.BEFORE)
        out = await super().execute_activity(input)
        self.points.inject(name, When.AFTER)
        return out


@dataclass
class Partitioned:
    settings: Settings  # the worker's: its Postgres through the proxy
    world: World
    proxy: FaultProxy


@asynccontextmanager
async def through_proxy(settings: Settings) -> AsyncIterator[Partitioned]:
    direct = settings.world.database_url
    async with FaultProxy(int(str(conninfo_to_dict(direct)["port"]))) as proxy:
        s = replace(settings, world=replace(
            settings.world, database_url=make_conninfo(direct, port=str(proxy.port))))
        world = World(s.world)
        try:
            yield Partitioned(s, world, proxy)
        finally:
            await world.close()


# -- many runs, a fault at every point ----------------------------------------------------------
POINTS_OF_A_RUN = (  # the activities of a plan of credits and S3 puts, in the order they come
    "guard.resolve", "probe.evaluate", "billing.issue_credit", "s3.put", "windows.record",
)
SYSTEMS = ("postgres", "s3", "temporal")


@dataclass(frozen=True)
class SoakConfig:
    seed: int = 47
    runs: int = 300
    concurrency: int = 12
    steps: int = 4  # two credits and two S3 puts a plan
    fault_every: int = 1  # one point in this many (a point: an activity's run, before or after)
    slack: int = 40  # how far ahead of the least-met point another may go
    max_faults: int | None = None  # then no more (the test's bound on its own length)
    short_s: tuple[float, float] = (0.1, 1.5)  # a blip: within the tries
    long_s: tuple[float, float] = (12.0, 20.0)  # a partition longer than the tries
    long_share: float = 0.1
    kill_every_s: tuple[float, float] = (20.0, 45.0)  # the second worker, SIGKILLed, started again
    settle_s: float = 1800.0  # the longest the runs may take, in all
    owed_within_s: float = 120.0  # the windows owed written once the faults are over


class Drawn:
    """Faults drawn at the points of every run: at one point in ``fault_every`` (and only
    while this point has not met ``slack`` more faults than the least-met one), the system and
    kind this (activity, moment) has met least so far, held or reset for a short or a long
    while. ``coverage``: how many faults each (activity, moment, system, kind) met."""

    def __init__(self, cfg: SoakConfig, proxies: dict[str, FaultProxy]) -> None:
        import random

        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.proxies = proxies
        self.seen = 0
        self.coverage: dict[tuple[str, When, str, Kind], int] = {
            (a, w, s, k): 0 for a in POINTS_OF_A_RUN for w in When for s in proxies for k in Kind
        }

    def __call__(self, name: str, when: When, busy: frozenset[str]) -> Fault | None:
        if name not in POINTS_OF_A_RUN:
            return None
        if self.cfg.max_faults is not None and sum(self.coverage.values()) >= self.cfg.max_faults:
            return None
        self.seen += 1
        if self.seen % self.cfg.fault_every:
            return None
        # every point its share: one met more often (a probe's read comes many times a run)
        # waits until the rarer ones (a run's one windows row) have caught up
        at = {(a, w): 0 for a, w, _, _ in self.coverage}
        for (a, w, _, _), c in self.coverage.items():
            at[(a, w)] += c
        if at[(name, when)] > min(at.values()) + self.cfg.slack:
            return None
        options = [(c, (a, w, s, k)) for (a, w, s, k), c in self.coverage.items()
                   if a == name and w is when and s not in busy]
        if not options:
            return None
        least = min(c for c, _ in options)
        _, (_, _, system, kind) = self.rng.choice([o for o in options if o[0] == least])
        self.coverage[(name, when, system, kind)] += 1
        long = self.rng.random() < self.cfg.long_share
        for_s = self.rng.uniform(*(self.cfg.long_s if long else self.cfg.short_s))
        return Fault(system, self.proxies[system], kind, round(for_s, 2))


def soak_plan(index: int, bucket: str, tag: str) -> CrashPlan:
    """Plan ``index``: a credit, a new object, a credit, an object replaced, each after the
    one before (the amounts and bodies say which run and step they are of)."""
    run_id = f"soak-{tag}-{index:04d}"
    aid = f"acct_s{tag}{index:04d}"
    kinds = ("credit", "put_new", "credit", "put_replace")
    steps: list[dict[str, Any]] = []
    expected: list[Expected] = []
    for n, kind in enumerate(kinds, start=1):
        step: dict[str, Any] = {"n": n} | ({"depends_on": [n - 1]} if n > 1 else {})
        if kind == "credit":
            amount = f"{n}.{index % 100:02d}"
            step |= {"tool": "billing.issue_credit",
                     "args": {"account_id": aid, "amount_eur": float(amount)}}
            expected.append(Expected(n, kind, f"{aid} {amount}"))
        else:
            key = f"{run_id}/{'new' if kind == 'put_new' else 'old'}-{n}.txt"
            body = f"{run_id} step {n}"
            step |= {"tool": "s3.put", "args": {"bucket": bucket, "key": key, "body": body}}
            expected.append(Expected(n, kind, key, body))
        steps.append(step)
    plan = {"goal": f"soak plan {index}: two credits, two S3 writes", "steps": steps}
    return CrashPlan(index, run_id, aid, plan, tuple(expected))


@dataclass
class SoakResult:
    crash: CrashResult
    injected: list[Injected] = field(default_factory=list)
    coverage: dict[tuple[str, When, str, Kind], int] = field(default_factory=dict)
    kills: int = 0
    max_connections: int = 0  # client backends on the deployment's Postgres, most at once
    windows_missing: list[str] = field(default_factory=list)  # runs without a row at the end
    owed_written: int = 0  # bookkeeping rows worker A wrote late (Postgres was away)
    wall_s: float = 0.0

    @property
    def statuses(self) -> Counter[str]:
        return Counter(str(r.status) for r in self.crash.reports.values())

    @property
    def failed(self) -> dict[str, str]:
        return {k: v for k, v in self.crash.halted.items()
                if self.crash.reports[k].status != RunStatus.HALTED}

    @property
    def misreported(self) -> list[StepCount]:
        """A step done in the world that its report does not call done (or skipped as done),
        or one called done whose effect is not there; and any step of a succeeded run not
        done."""
        hidden = [c for c in self.crash.counts
                  if c.found and c.state not in (StepState.DONE, StepState.SKIPPED)
                  and self.crash.reports.get(c.plan.run_id) is not None
                  and self.crash.reports[c.plan.run_id].status != RunStatus.HALTED]
        return self.crash.lost + hidden

    def lines(self) -> list[str]:
        c = self.crash
        by_point = Counter(f"{i.activity} {i.when}" for i in self.injected)
        by_fault = Counter(f"{i.system} {i.kind}" for i in self.injected)
        longs = sum(i.for_s >= 10 for i in self.injected)
        halted = {k: v for k, v in c.halted.items() if k not in self.failed}
        out = [
            f"runs: {len(c.plans)} of {c.config.steps} steps; {dict(sorted(self.statuses.items()))}"
            f"; not ended: {len(c.unfinished)}; wall {self.wall_s:.0f} s",
            f"faults injected: {len(self.injected)} ({longs} longer than 10 s); "
            f"second worker SIGKILLed {self.kills} times",
            "  by point: " + ", ".join(f"{k} {v}" for k, v in sorted(by_point.items())),
            "  by fault: " + ", ".join(f"{k} {v}" for k, v in sorted(by_fault.items())),
            f"  points never met: {sum(1 for v in self.coverage.values() if not v)} of "
            f"{len(self.coverage)}",
            f"failed runs: {len(self.failed)}; halted for a person: {len(halted)} "
            f"({100 * len(halted) / max(1, len(c.reports)):.1f}%)",
            f"duplicate effects: {sum(x.found - 1 for x in c.duplicates)}; stray: {len(c.stray)}; "
            f"misreported steps: {len(self.misreported)}",
            f"windows rows missing at the end: {len(self.windows_missing)}; written late "
            f"(owed while Postgres was away): {self.owed_written}",
            f"most Postgres connections held at once: {self.max_connections}",
        ]
        out += [f"  failed: {k}: {v}" for k, v in self.failed.items()]
        out += [f"  halted: {k}: {v}" for k, v in halted.items()]
        out += [f"  misreported: {x.plan.run_id} step {x.expected.n} {x.expected.kind} "
                f"({x.state or 'no report'}): found {x.found}" for x in self.misreported]
        out += [f"  duplicate: {x.plan.run_id} step {x.expected.n}: {x.found}"
                for x in c.duplicates]
        out += [f"  windows missing: {w}" for w in self.windows_missing[:10]]
        return out


async def _connections(dsn: str, seen: list[int], stop: asyncio.Event) -> None:
    """The most client backends Postgres holds at once, sampled every 0.2 s."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
            row = await cur.fetchone()
            seen.append(int(row[0]) if row else 0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)


def _through(url: str, port: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{parts.hostname}:{port}"))


class FaultSoak(CrashHarness):
    """Worker A (in this process) reaches Postgres, S3 and Temporal through fault proxies and
    meets the faults ``Drawn`` picks at its activities' points; worker B (a ``plangate worker``
    process, direct) polls the same queue and is SIGKILLed and started again now and then."""

    async def soak(self, cfg: SoakConfig, s3: S3Client) -> SoakResult:
        crash = CrashResult(CrashConfig(seed=cfg.seed, kills=0, plans=cfg.runs,
                                        steps=cfg.steps))
        out = SoakResult(crash)
        world = World(self.settings.world)
        try:
            await ensure_schema(world, self.settings.catalogue)
            await asyncio.to_thread(self._bucket, s3)
            for i in range(cfg.runs):
                crash.plans.append(soak_plan(i, self.bucket, self.tag))
            await asyncio.gather(*(seed_plan(world, s3, self.bucket, p) for p in crash.plans))
            await self._soak(cfg, out)
            await self._windows(cfg, out, world)
        finally:
            await world.close()
        await self._count(crash, s3)
        return out

    async def _soak(self, cfg: SoakConfig, out: SoakResult) -> None:
        import random

        from plangate.client.connection import connect
        from plangate.worker.assembly import build_worker

        rng = random.Random(f"{cfg.seed}/kills")
        base = Settings.from_env(self.env)
        w, t = base.world, base.temporal
        pg_port = int(str(conninfo_to_dict(w.database_url)["port"]))
        s3_port = urlsplit(w.s3_endpoint_url or "").port or 80
        t_host, t_port = t.address.rsplit(":", 1)
        proxies = {"postgres": FaultProxy(pg_port), "s3": FaultProxy(s3_port),
                   "temporal": FaultProxy(int(t_port), t_host)}
        for p in proxies.values():
            await p.start()
        a = replace(base, world=replace(
            w, database_url=make_conninfo(w.database_url, port=str(proxies["postgres"].port)),
            s3_endpoint_url=_through(w.s3_endpoint_url or "", proxies["s3"].port),
        ), temporal=replace(t, address=f"{t_host}:{proxies['temporal'].port}"))
        drawn = Drawn(cfg, proxies)
        points = FaultPoints(drawn)
        stop = asyncio.Event()
        seen: list[int] = []
        watch = asyncio.create_task(_connections(w.database_url, seen, stop))
        runs: dict[str, asyncio.Task[RunReport]] = {}
        log = (self.log_dir / f"soak-{self.tag}-workers.log").open("a")
        b = WorkerProcess(self.env, log)
        a_world = World(a.world)
        t0 = time.monotonic()
        try:
            a_client = await connect(a)
            await b.start()
            async with await build_worker(a_client, a, a_world, interceptors=[points],
                                          identity=f"soak-a-{self.tag}"):
                waiting = list(out.crash.plans)

                async def feed() -> None:
                    while waiting:
                        if sum(not x.done() for x in runs.values()) >= cfg.concurrency:
                            await asyncio.sleep(0.05)
                            continue
                        p = waiting.pop(0)
                        handle = await self.api.submit(p.body, run_id=p.run_id)
                        runs[p.run_id] = asyncio.create_task(_result(handle))

                def ended() -> bool:
                    return not waiting and all(x.done() for x in runs.values())

                feeding = asyncio.create_task(feed())
                while not ended() and time.monotonic() - t0 < cfg.settle_s:
                    pause = rng.uniform(*cfg.kill_every_s)
                    while pause > 0 and not ended():
                        await asyncio.sleep(0.5)
                        pause -= 0.5
                    if not ended():
                        await b.kill()
                        out.kills += 1
                        b = WorkerProcess(self.env, log)
                        await b.start()
                await feeding
                _, late = await asyncio.wait(list(runs.values()), timeout=cfg.settle_s)
                for x in late:
                    x.cancel()
                await points.close()
                await owed(a_world).settled(cfg.owed_within_s)  # before worker A stops
                out.owed_written = owed(a_world).paid
        finally:
            await b.kill(signal.SIGTERM)
            log.close()
            stop.set()
            await watch
            await a_world.close()
            for p in proxies.values():
                await p.stop()
        out.wall_s = time.monotonic() - t0
        out.injected, out.coverage = points.injected, drawn.coverage
        out.max_connections = max(seen, default=0)
        await self._collect(out.crash, runs)

    async def _windows(self, cfg: SoakConfig, out: SoakResult, world: World) -> None:
        """Every run's windows row, waited for a while (a row owed is written late)."""
        ids = [p.run_id for p in out.crash.plans]
        deadline = time.monotonic() + cfg.owed_within_s
        while True:
            async with (await world.pool()).connection() as conn:
                cur = await conn.execute(
                    "SELECT DISTINCT workflow_id FROM plangate.windows WHERE workflow_id = "
                    "ANY(%s)", (ids,))
                have = {r[0] for r in await cur.fetchall()}
            out.windows_missing = [i for i in ids if i not in have]
            if not out.windows_missing or time.monotonic() > deadline:
                return
            await asyncio.sleep(1)
