"""The crash harness (issue 12, part 1): plans whose steps are money, external and conditional
S3 effects, run by a real worker **process** (``python -m plangate worker``, the command an
operator runs) that is killed with SIGKILL at seeded random moments and started again as a new
process; then the world is counted.

Every run must end; every effect must be in the world exactly once (credits and outbox rows in
Postgres, object versions in a versioned S3 bucket, counted per step by what identifies the
step's effect, not by idempotency key, so a second effect under a new key counts too); no step
may be lost (a step reported done whose effect is missing); a run halted for a person is
counted with the reason it gives.

``tests/test_crash.py`` runs it with a few kills; ``bench/crash.py`` with at least 100.
Nothing is mocked: the worker is the product's own, with its real timeouts (a killed worker's
tool call is noticed when its heartbeat times out, 30 s: ``workflows/options.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import psycopg
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from plangate.activities.bootstrap import ensure_schema
from plangate.activities.tools import TOOLS, CallContext
from plangate.client.api import Plangate
from plangate.demo.schema import Account, seed_account
from plangate.records.calls import Outcome, ToolCall, ToolResult
from plangate.records.options import TOOL_ATTEMPTS
from plangate.records.report import Phase, RunReport, RunStatus, StepState
from plangate.testing import ended
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

ROOT = Path(__file__).resolve().parent.parent
READY_LINE = "plangate: worker polling"
TEMPLATE = "crash_notice"
# step kinds and how often a plan has each
KINDS = (("credit", 4), ("email", 3), ("put_new", 2), ("put_replace", 2))
SEED_BODY = "seeded before the run"


@dataclass(frozen=True)
class Expected:
    """One step's effect and what identifies it in the world (not its idempotency key)."""

    n: int
    kind: str  # credit | email | put_new | put_replace
    ident: str  # credit: "<account> <amount>"; email: the address; puts: the object key
    body: str = ""  # puts: the content the step leaves


@dataclass(frozen=True)
class CrashPlan:
    index: int
    run_id: str
    account_id: str
    body: dict[str, Any]
    expected: tuple[Expected, ...]


def make_plan(
    seed: int, index: int, steps: int, bucket: str, tag: str,
    kinds: tuple[tuple[str, int], ...] = KINDS,
) -> CrashPlan:
    """Plan ``index`` of a seeded sequence: ``steps`` steps, mostly chained (some run beside
    their predecessor), each a credit, an e-mail, or an S3 put that creates an object
    (If-None-Match: *, from its pre probe) or replaces a seeded one (If-Match: its ETag)."""
    rng = random.Random(f"{seed}/{index}")
    run_id = f"crash-{tag}-{index:03d}"
    aid = f"acct_c{tag}{index:03d}"
    drawn = [k for k, w in kinds for _ in range(w)]
    out: list[dict[str, Any]] = []
    expected: list[Expected] = []
    for n in range(1, steps + 1):
        kind = rng.choice(drawn)
        step: dict[str, Any] = {"n": n}
        if n > 1:
            r = rng.random()
            step["depends_on"] = [n - 1] if r < 0.7 else ([rng.randrange(1, n)] if r < 0.9 else [])
        if kind == "credit":
            amount = f"{n}.{rng.randrange(1, 100):02d}"  # the whole euros say which step
            step |= {"tool": "billing.issue_credit",
                     "args": {"account_id": aid, "amount_eur": float(amount)}}
            expected.append(Expected(n, kind, f"{aid} {amount}"))
        elif kind == "email":
            to = f"step{n}@{aid.replace('_', '-')}.example"
            step |= {"tool": "email.send",
                     "args": {"to": to, "template": TEMPLATE, "account_id": aid}}
            expected.append(Expected(n, kind, to))
        else:
            key = f"{run_id}/{'new' if kind == 'put_new' else 'old'}-{n}.txt"
            body = f"{run_id} step {n}: {rng.getrandbits(64):016x}"
            step |= {"tool": "s3.put", "args": {"bucket": bucket, "key": key, "body": body}}
            expected.append(Expected(n, kind, key, body))
        out.append(step)
    plan = {"goal": f"crash plan {index}: credits, e-mails and S3 writes", "steps": out}
    return CrashPlan(index, run_id, aid, plan, tuple(expected))


async def seed_plan(world: World, s3: S3Client, bucket: str, plan: CrashPlan) -> None:
    """The plan's account (closed: its credits apply to it, not to suspense) and the objects
    its replacing puts find."""
    await seed_account(world, Account(plan.account_id, f"ar@{plan.account_id}.example",
                                      status="closed"))
    for e in plan.expected:
        if e.kind == "put_replace":
            await asyncio.to_thread(s3.put_object, Bucket=bucket, Key=e.ident,
                                    Body=SEED_BODY.encode())


# -- the worker process -------------------------------------------------------------------------
class WorkerProcess:
    """``python -m plangate worker`` with the deployment's environment; its output appended to
    ``log``."""

    def __init__(self, env: Mapping[str, str], log: TextIO) -> None:
        self.env = dict(env)
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None

    async def start(self, ready_within_s: float = 120.0) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "plangate", "worker",
            cwd=ROOT, env=self.env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=self.log,
        )
        assert self.proc.stdout is not None
        out = self.proc.stdout

        async def ready() -> None:
            while True:
                line = (await out.readline()).decode()
                if not line:
                    why = f"the worker ended before it was ready (see {self.log.name})"
                    raise RuntimeError(why)
                self.log.write(line)
                if line.startswith(READY_LINE):
                    return

        await asyncio.wait_for(ready(), ready_within_s)
        self._drain = asyncio.create_task(self._copy(out))

    async def _copy(self, out: asyncio.StreamReader) -> None:
        while line := await out.readline():
            self.log.write(line.decode())

    async def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.send_signal(sig)
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        if self._drain is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._drain, 5)
        self.log.flush()


# -- the run ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CrashConfig:
    seed: int = 12
    kills: int = 3
    plans: int = 3  # at least this many plans; more are started while kills remain
    concurrency: int = 3  # plans running at once
    steps: int = 8
    kill_after_s: tuple[float, float] = (0.3, 2.0)  # after the new worker is ready
    # the first ``aimed`` kills wait (up to ``aim_within_s``) until a credit is in flight: the
    # harness holds its account's row (FOR UPDATE), the credit's transaction waits for it
    aimed: int = 0
    aim_within_s: float = 30.0
    kinds: tuple[tuple[str, int], ...] = KINDS  # the step kinds, with their weights
    settle_s: float = 600.0  # after the last kill, the longest the runs may take to end


@dataclass
class StepCount:
    plan: CrashPlan
    expected: Expected
    state: str  # the step's final state, "" when the run never reported it
    found: int  # effects in the world that identify this step


@dataclass
class CrashResult:
    config: CrashConfig
    plans: list[CrashPlan] = field(default_factory=list)
    reports: dict[str, RunReport] = field(default_factory=dict)
    unfinished: list[str] = field(default_factory=list)  # runs not terminal at the end
    kills: int = 0
    aimed: int = 0  # kills that found a credit in flight (held by the harness's row lock)
    kill_times: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    kills_s: float = 0.0  # the first worker ready -> the last kill
    counts: list[StepCount] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)  # effects in the world no step explains
    history: Counter[str] = field(default_factory=Counter)  # events of note, over all runs

    @property
    def duplicates(self) -> list[StepCount]:
        return [c for c in self.counts if c.found > 1]

    @property
    def lost(self) -> list[StepCount]:
        """Steps the run reported done (or skipped as done) whose effect is not in the world;
        and steps of a succeeded run that are not done."""
        out = []
        for c in self.counts:
            rep = self.reports.get(c.plan.run_id)
            done = c.state in (StepState.DONE, StepState.SKIPPED)
            if (done and c.found == 0) or (
                rep is not None and rep.status == RunStatus.SUCCEEDED and not done
            ):
                out.append(c)
        return out

    @property
    def halted(self) -> dict[str, str]:
        """Runs halted for a person, with why."""
        out: dict[str, str] = {}
        for run_id, rep in sorted(self.reports.items()):
            if rep.status != RunStatus.SUCCEEDED:
                f = rep.failure
                why = f"{rep.status}: " + (
                    f"step {f.step} ({f.tool}) {f.code}: {f.detail}" if f else str(rep.escalation)
                )
                out[run_id] = why[:300]
        return out

    def read_backs(self) -> Counter[str]:
        """The reads by idempotency key after an unknown outcome: found, absent, unanswered;
        and the re-evaluations after a 412 (a conditional S3 write that had landed)."""
        out: Counter[str] = Counter()
        for rep in self.reports.values():
            for s in rep.steps:
                for c in s.checks:
                    if c.phase == Phase.READ_BACK:
                        o = c.results[0].outcome if c.results else None
                        out[{Outcome.HOLDS: "found", Outcome.VIOLATED: "absent"}.get(
                            o, "unanswered") if o else "unanswered"] += 1
                    elif c.phase == Phase.RE_EVALUATE:
                        out["re-evaluated after 412"] += 1
                if s.state == StepState.SKIPPED:
                    out["skipped as done"] += 1
        return out

    def lines(self) -> list[str]:
        minutes = self.kills_s / 60 if self.kills_s else 0.0
        steps = sum(len(p.expected) for p in self.plans)
        statuses = Counter(str(r.status) for r in self.reports.values())
        out = [
            f"plans: {len(self.plans)} ({steps} steps: "
            + ", ".join(f"{v} {k}" for k, v in sorted(
                Counter(e.kind for p in self.plans for e in p.expected).items())) + ")",
            f"kills: {self.kills} SIGKILLs of the worker process, each followed by a new one"
            + (f" ({self.aimed} while a credit was held in flight)" if self.config.aimed else ""),
            f"wall time: {self.wall_s:.0f} s (kills over {self.kills_s:.0f} s)",
            f"kills per minute: {self.kills / minutes:.1f}" if minutes else "kills per minute: -",
            f"runs: {dict(sorted(statuses.items()))}; not terminal: {len(self.unfinished)}; "
            f"re-plans: {sum(r.replans_used for r in self.reports.values())}",
            f"duplicate effects: {sum(c.found - 1 for c in self.duplicates)}"
            f" (steps with more than one: {len(self.duplicates)}); "
            f"stray effects: {len(self.stray)}",
            f"lost steps: {len(self.lost)}",
            "tool calls caught in flight: "
            f"{self.history['activity timed out']} timed out, "
            f"{self.history['activity attempts retried']} retried; workflow tasks timed out: "
            f"{self.history['workflow task timed out']}; workflow tasks failed: "
            f"{self.history['workflow task failed']}",
            "read back by idempotency key: "
            + (", ".join(f"{k} {v}" for k, v in sorted(self.read_backs().items())) or "none"),
            f"runs halted for a person: {len(self.halted)} of {len(self.reports)}",
        ]
        out += [f"  {run_id}: {why}" for run_id, why in self.halted.items()]
        out += [f"  duplicate: {c.plan.run_id} step {c.expected.n} {c.expected.kind} "
                f"{c.expected.ident}: {c.found}" for c in self.duplicates]
        out += [f"  lost: {c.plan.run_id} step {c.expected.n} {c.expected.kind} ({c.state}): "
                f"{c.found}" for c in self.lost]
        out += [f"  stray: {s}" for s in self.stray]
        return out


class CrashHarness:
    """One crash run against a stack's environment (``env``: plangate's variables pointing at
    Temporal, Postgres and S3). The worker processes poll a task queue of their own."""

    def __init__(
        self, client: Client, settings: Settings, env: Mapping[str, str], log_dir: Path,
        bucket: str | None = None,
    ) -> None:
        self.tag = uuid.uuid4().hex[:6]
        # the demo systems on (billing, e-mail), the worker processes' own task queue
        self.settings = replace(
            settings, temporal=replace(settings.temporal, task_queue=f"crash-{self.tag}"),
            catalogue=replace(settings.catalogue, demo_systems=True),
        )
        self.client = client
        self.api = Plangate(client, self.settings)
        # no cards: the crashes are the point (``bench.crash`` runs it from a shell that sets
        # no PLANGATE_APPROVE_EFFECTS, whose default holds every credit and e-mail for a person)
        self.env = {
            **os.environ, **env, "PLANGATE_DEMO_SYSTEMS": "1", "PLANGATE_APPROVE_EFFECTS": "none",
            "PLANGATE_TASK_QUEUE": self.settings.temporal.task_queue, "PYTHONUNBUFFERED": "1",
        }
        self.log_dir = log_dir
        self.bucket = bucket or f"crash-{self.tag}"

    async def run(self, cfg: CrashConfig, s3: S3Client) -> CrashResult:
        result = CrashResult(cfg)
        world = World(self.settings.world)
        try:
            await ensure_schema(world, self.settings.catalogue)
            await asyncio.to_thread(self._bucket, s3)
            await self._run(cfg, result, world, s3)
        finally:
            await world.close()
        await self._count(result, s3)
        return result

    def _bucket(self, s3: S3Client) -> None:
        s3.create_bucket(Bucket=self.bucket)
        s3.put_bucket_versioning(
            Bucket=self.bucket, VersioningConfiguration={"Status": "Enabled"}
        )

    async def _run(self, cfg: CrashConfig, result: CrashResult, world: World, s3: S3Client) -> None:
        rng = random.Random(cfg.seed)
        runs: dict[str, asyncio.Task[RunReport]] = {}
        kills_done = asyncio.Event()

        async def submit() -> None:
            plan = make_plan(
                cfg.seed, len(result.plans), cfg.steps, self.bucket, self.tag, cfg.kinds
            )
            result.plans.append(plan)
            await seed_plan(world, s3, self.bucket, plan)
            handle = await self.api.submit(plan.body, run_id=plan.run_id)
            runs[plan.run_id] = asyncio.create_task(_result(handle))

        async def top_up() -> None:
            # keep ``concurrency`` plans running while kills remain (and at least ``plans``)
            while True:
                running = sum(not t.done() for t in runs.values())
                more = not kills_done.is_set() or len(result.plans) < cfg.plans
                if not more:
                    return
                if running < cfg.concurrency:
                    await submit()
                else:
                    await asyncio.sleep(0.2)

        t0 = time.monotonic()
        log = (self.log_dir / f"crash-{self.tag}-workers.log").open("a")
        worker = WorkerProcess(self.env, log)
        feeder: asyncio.Task[None] | None = None
        try:
            for _ in range(cfg.concurrency):
                await submit()
            await worker.start()
            feeder = asyncio.create_task(top_up())
            first_ready = time.monotonic()
            while result.kills < cfg.kills:
                await asyncio.sleep(rng.uniform(*cfg.kill_after_s))
                if result.kills < cfg.aimed:
                    async with self._credit_in_flight(result, cfg.aim_within_s) as held:
                        result.aimed += held
                        await worker.kill()
                else:
                    await worker.kill()
                result.kills += 1
                result.kill_times.append(time.monotonic() - t0)
                result.kills_s = time.monotonic() - first_ready
                worker = WorkerProcess(self.env, log)
                await worker.start()
            kills_done.set()
            await feeder
            pending = list(runs.values())
            _, late = await asyncio.wait(pending, timeout=cfg.settle_s)
            for t in late:
                t.cancel()
        finally:
            if feeder is not None and not feeder.done():
                feeder.cancel()
            await worker.kill(signal.SIGTERM)
            log.close()
        result.wall_s = time.monotonic() - t0
        await self._collect(result, runs)

    async def _collect(self, result: CrashResult, runs: Mapping[str, asyncio.Task[RunReport]]
                       ) -> None:
        """Each run's report (its result, or for one that did not end, what it says now) and
        what its history shows of the faults."""
        for run_id, task in runs.items():
            if task.done() and not task.cancelled() and task.exception() is None:
                result.reports[run_id] = task.result()
            else:
                result.unfinished.append(run_id)
                with contextlib.suppress(Exception):
                    result.reports[run_id] = await self.api.report(run_id)
        for run_id in runs:
            result.history.update(await history_of_note(self.client, run_id))

    @contextlib.asynccontextmanager
    async def _credit_in_flight(self, result: CrashResult, within_s: float) -> AsyncIterator[bool]:
        """``credit_in_flight`` over every plan's account; yields whether a credit waited."""
        async with credit_in_flight(
            self.settings.world.database_url, lambda: [p.account_id for p in result.plans],
            within_s,
        ) as waiting:
            yield bool(waiting)

    async def _count(self, result: CrashResult, s3: S3Client) -> None:
        """Each step's effect, found in the world by what identifies it."""
        accounts = [p.account_id for p in result.plans]
        async with await psycopg.AsyncConnection.connect(
            self.settings.world.database_url, autocommit=True
        ) as pg:
            cur = await pg.execute(
                "SELECT account_id, amount_eur::text, count(*) FROM demo.credits "
                "WHERE account_id = ANY(%s) GROUP BY 1, 2", (accounts,))
            credits = {f"{a} {amt}": int(c) for a, amt, c in await cur.fetchall()}
            cur = await pg.execute(
                "SELECT to_address, count(*) FROM demo.outbox WHERE account_id = ANY(%s) "
                "GROUP BY 1", (accounts,))
            mails = {to: int(c) for to, c in await cur.fetchall()}
        versions = await asyncio.to_thread(object_versions, s3, self.bucket)
        explained: set[str] = set()
        for plan in result.plans:
            rep = result.reports.get(plan.run_id)
            for e in plan.expected:
                if e.kind == "credit":
                    found = credits.get(e.ident, 0)
                elif e.kind == "email":
                    found = mails.get(e.ident, 0)
                else:
                    bodies = versions.get(e.ident, [])
                    mine = [b for b in bodies if b != SEED_BODY]
                    found = len(mine)
                    if e.kind == "put_replace" and SEED_BODY not in bodies:
                        result.stray.append(f"{e.ident}: the seeded version is gone")
                    if any(b != e.body for b in mine):
                        result.stray.append(f"{e.ident}: a version with other content")
                explained.add(e.ident)
                state = ""
                if rep is not None:
                    with contextlib.suppress(KeyError):
                        state = str(rep.step(e.n).state)
                result.counts.append(StepCount(plan, e, state, found))
        result.stray += [f"credit {k}" for k in credits if k not in explained]
        result.stray += [f"e-mail {k}" for k in mails if k not in explained]
        result.stray += [f"object {k}" for k in versions if k not in explained]


@contextlib.asynccontextmanager
async def credit_in_flight(
    url: str, accounts: Callable[[], list[str]], within_s: float
) -> AsyncIterator[list[int]]:
    """Hold the rows of ``accounts()`` (``FOR UPDATE``) until a credit's transaction waits for
    one (its ``FOR SHARE``), at most ``within_s``: a money call is in flight, its request sent,
    its answer not yet given. Yields the waiting backends' pids (none: no credit came); the rows
    are let go when the block ends (and the credit's statement then goes on in Postgres, whatever
    became of the worker that sent it)."""
    async with (
        await psycopg.AsyncConnection.connect(url) as pg,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as look,
    ):
        deadline = time.monotonic() + within_s
        waiting: list[int] = []
        while not waiting and time.monotonic() < deadline:
            # asked again each time: the plans started since the last look too (the running
            # ones may all be past their credits, and a new plan's account is a new row)
            await pg.execute(
                "SELECT 1 FROM demo.customers WHERE account_id = ANY(%s) FOR UPDATE",
                (accounts(),),
            )
            await asyncio.sleep(0.05)
            cur = await look.execute(
                "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                (pg.info.backend_pid,),
            )
            waiting = [int(r[0]) for r in await cur.fetchall()]
        try:
            yield waiting
        finally:
            await pg.rollback()


async def _result(handle: WorkflowHandle[Any, RunReport]) -> RunReport:
    """The run's last report (a halted run fails its execution with it); asked again while
    the Temporal server cannot answer (a restart)."""
    for _ in range(60):
        try:
            return await ended(handle)
        except RPCError:
            await asyncio.sleep(1)
    return await ended(handle)


def object_versions(s3: S3Client, bucket: str) -> dict[str, list[str]]:
    """Every version of every object in ``bucket``: key -> the bodies, oldest first."""
    out: dict[str, list[str]] = {}
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for v in sorted(page.get("Versions", []), key=lambda v: v["LastModified"]):
            body = s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])
            out.setdefault(v["Key"], []).append(body["Body"].read().decode())
    return out


async def history_of_note(client: Client, run_id: str) -> Counter[str]:
    """What a killed worker leaves in a run's history: activity attempts that timed out (a
    tool call in flight when its worker died) and workflow tasks that timed out or failed."""
    kinds = {
        EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity timed out",
        EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT: "workflow task timed out",
        EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED: "workflow task failed",
    }
    out: Counter[str] = Counter()
    async for e in client.get_workflow_handle(run_id).fetch_history_events():
        if e.event_type in kinds:
            out[kinds[e.event_type]] += 1
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            # a retried write: its earlier attempts are not in the history, only their count
            out["activity attempts retried"] += e.activity_task_started_event_attributes.attempt - 1
    return out


# -- a call whose answer is lost, every attempt (tests/test_crash.py, tests/histories) --------
class LostPut:
    """``s3.put`` whose answer never comes back, every attempt of its first call: the real
    write is made first (``lands``), or not at all; later calls act and answer normally."""

    def __init__(self, world: World, lands: bool) -> None:
        self.world, self.lands = world, lands
        self.calls = 0

    @activity.defn(name="s3.put")
    async def run(self, call: ToolCall) -> ToolResult:
        self.calls += 1
        spec = TOOLS["s3.put"]
        ctx = CallContext(call.step.run_id, call.step.n, call.idempotency_key)
        args = spec.args.model_validate(call.step.args)
        if self.calls > TOOL_ATTEMPTS:  # a second call of the step: it acts and answers
            out = await spec.fn(args, self.world, ctx)
            now = activity.info().started_time
            return ToolResult(output=out, started_at=now, finished_at=now)
        if self.lands:
            with contextlib.suppress(ToolError):  # a retried attempt is refused: 412
                await spec.fn(args, self.world, ctx)
        raise ConnectionResetError("connection reset before the answer came back")


def put_plan(bucket: str, key: str) -> dict[str, Any]:
    return {"goal": "write once", "budget": {"replans_max": 2}, "steps": [
        {"n": 1, "tool": "s3.put", "args": {"bucket": bucket, "key": key, "body": "once"}},
        {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
         "args": {"statement": "select_one"}},
    ]}
