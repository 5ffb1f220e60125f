"""Open runs on one worker (issues 23 and 39): runs waiting for a card on one ``plangate
worker`` process (the command an operator runs, on a task queue of its own), what they cost it
while they wait, the card list, ``plangate runs`` and the approval page over them; then
finished runs, and ``plangate report`` over them.

    .venv/bin/python -m bench.scale [--waiting 1000] [--finished 10000] [--seed 23]
                                    [--concurrency 100] [--cpu-window 20]
                                    [--max-cached-runs N] [--checked 1000]
    .venv/bin/python -m bench.scale --waiting 10000 --finished 0   # 10-17 minutes
    .venv/bin/python -m bench.scale --throughput [--plans 1000] [--steps 5] [--rounds 1]

``--throughput`` (issue 50): plans started at once, guarded against hand-written, steps/s and
p99 step latency (``bench._scale_throughput``); nothing else of this bench runs then.

Prints each phase's lines as it ends, each figure beside the issue's goal: how long the waiting
runs took to reach their cards (progress on stderr); the worker's RSS idle (after warm-up runs)
and with them all waiting, per waiting run in KiB; its CPU while they wait (CPU seconds / wall
seconds); ``--checked`` of the waiting runs (a seeded sample: reading one replays it when it was
evicted) read for their pending card; the card list (``Plangate.pending_approvals``: cards
returned of those waiting, truncated or not) beside its listing alone (the server's pages as
sent, and the SDK's ``list_workflows``), ``plangate runs`` with and without ``--status
awaiting_approval`` (lines printed) and the approval page (``plangate ui``, its list page
fetched with urllib: the cards it counts, those it shows, its size), each the median of 3 wall
seconds; the finished runs' rate (one-step ``SELECT 1`` plans, ``--concurrency`` in flight;
``--finished 0``: none); ``plangate report`` over them (median of 3 when one is under 30 s) in
seconds and runs/s; and the card list, ``plangate runs`` and the page again with the finished
runs there. The waiting runs are left open to the end. ``--max-cached-runs``:
``PLANGATE_MAX_CACHED_RUNS`` of the worker (default: unset, plangate's default); ``--seed``: the
names of the task queue and the runs. Every CLI call is ``python -m plangate`` from this
checkout, a process of its own, its interpreter's start included. Exit 1 if a run failed, a
waiting run never awaited approval, or a run read showed no pending card; the goals decide
nothing.
"""
from __future__ import annotations

import argparse
import asyncio
import http.cookiejar
import os
import random
import re
import signal
import statistics
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TextIO, TypeVar

import psutil

from plangate.client import paging, reporting
from plangate.client.api import Plangate, runs_query
from plangate.client.connection import connect
from plangate.client.pending import pending_query
from plangate.records.approvals import CardStatus
from plangate.records.interface import PLAN_RUN
from plangate.records.placement import visibility_clause
from plangate.records.report import RunStatus
from plangate.records.signing import SigningKey
from plangate.testing import approver_env, embedded_stack, s3_client
from plangate.world.clients import World
from plangate.world.settings import DEMO_SYSTEMS_VAR, Settings
from tests.crash_harness import ROOT, WorkerProcess

T = TypeVar("T")
MEDIAN_OF = 3
ONCE_OVER_S = 30.0  # a report slower than this is timed once
APPROVER = "bench"


def waiting_plan(bucket: str, i: int) -> dict[str, Any]:
    """One step that waits for a person (``bench.approval``'s)."""
    return {"goal": f"scale: waits {i}", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "approval": "required",
         "args": {"bucket": bucket, "key": f"wait-{i}.txt", "body": "figures"}}]}


def finished_plan(i: int) -> dict[str, Any]:
    """The cheapest run that finishes: one read, ``SELECT 1``."""
    return {"goal": f"scale: done {i}", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "args": {"statement": "select_one"}}]}


async def bounded(n: int, at_once: int, one: Callable[[int], Awaitable[T]]) -> list[T]:
    gate = asyncio.Semaphore(at_once)

    async def run(i: int) -> T:
        async with gate:
            return await one(i)

    return await asyncio.gather(*(run(i) for i in range(n)))


async def timed(fn: Callable[[], Awaitable[T]]) -> tuple[float, T]:
    t0 = time.perf_counter()
    out = await fn()
    return time.perf_counter() - t0, out


async def median(fn: Callable[[], Awaitable[T]], times: int = MEDIAN_OF) -> tuple[float, T]:
    """The median wall seconds of ``times`` calls, and the last call's answer."""
    walls: list[float] = []
    for _ in range(times):
        s, out = await timed(fn)
        walls.append(s)
    return statistics.median(walls), out


async def plangate(env: Mapping[str, str], *args: str) -> str:
    """``python -m plangate ARGS`` from this checkout, a process of its own: its stdout."""
    return (await plangate_said(env, *args))[0]


async def plangate_said(env: Mapping[str, str], *args: str) -> tuple[str, str]:
    """The same: its stdout and its stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "plangate", *args, cwd=ROOT, env=dict(env),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"plangate {' '.join(args)}: exit {proc.returncode}: {err.decode()}")
    return out.decode(), err.decode()


def lines(text: str) -> int:
    return len(text.splitlines())


@asynccontextmanager
async def approval_page(env: Mapping[str, str], log: TextIO) -> AsyncIterator[str]:
    """``plangate ui --port 0`` (docs/people.md), until the block ends: its URL."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "plangate", "ui", "--port", "0", cwd=ROOT, env=dict(env),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=log)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        found = re.search(rb"serving (http://\S+/) ", line)
        if found is None:
            raise SystemExit(f"plangate ui did not serve: {line!r} (see {log.name})")
        yield found.group(1).decode()
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


class PageReader:
    """A person on the approval page: logged in once with the login token (posted to
    ``/login``, which redirects to the cards with a session cookie), then the list page
    fetched."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        form = urllib.parse.urlencode({"token": token}).encode()
        self.opener.open(f"{url}login", form, timeout=120).read()

    def cards(self) -> tuple[int, int, int, bool]:
        """The cards the list page counts, the cards it shows (a page of them), its size in
        bytes, and whether it said only the first runs were read."""
        with self.opener.open(self.url, timeout=120) as r:
            body = r.read()
        page = body.decode()
        found = re.search(r"<title>plangate: (\d+) approval cards</title>", page)
        if found is None:
            raise SystemExit(f"the approval page shows no cards list: {page[:300]!r}")
        shown = page.count('<section class="card')
        return int(found.group(1)), shown, len(body), "open runs were read" in page


class WorkerUse:
    """RSS and CPU of the worker process (and any children it has)."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)

    def _all(self) -> list[psutil.Process]:
        return [self.proc, *self.proc.children(recursive=True)]

    def rss(self) -> int:
        return sum(p.memory_info().rss for p in self._all())

    def cpu_s(self) -> float:
        return sum(t.user + t.system for t in (p.cpu_times() for p in self._all()))


async def count(api: Plangate, query: str) -> int:
    return (await api.client.count_workflows(query)).count


async def until_counted(api: Plangate, query: str, want: int, within_s: float) -> int:
    """Poll visibility until ``query`` counts ``want`` runs (or ``within_s`` passes): the
    count then."""
    t0 = time.monotonic()
    told = t0
    while True:
        n = await count(api, query)
        if n >= want or time.monotonic() > t0 + within_s:
            return n
        if time.monotonic() - told > 30:  # progress, on stderr
            told = time.monotonic()
            print(f"  {n} of {want} after {told - t0:.0f} s", file=sys.stderr, flush=True)
        await asyncio.sleep(0.5)


async def listed(api: Plangate, query: str) -> int:
    """The runs one visibility list of ``query`` names, every page of it."""
    return len([wf async for wf in api.client.list_workflows(query)])


async def server_pages(api: Plangate, query: str) -> int:
    """The listing's pages as the server sends them, nothing decoded (what the report reads)."""
    return sum([len(p) async for p in paging.pages(api.client, query)])


async def has_card(api: Plangate, run_id: str) -> bool | str:
    """Whether the run's report shows a pending card; why not, where it could not be read (a
    loaded worker replaying an evicted run may miss the query's deadline)."""
    try:
        rep = await api.report(run_id)
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[:160]}"
    return not rep.status.final and any(a.status is CardStatus.PENDING for a in rep.approvals)


class Scale:
    """One bench run: the client, the worker's use, the environment a ``plangate`` process is
    given, the runs that went wrong."""

    def __init__(self, a: argparse.Namespace, api: Plangate, env: Mapping[str, str],
                 use: WorkerUse, tag: str) -> None:
        self.a, self.api, self.env, self.use, self.tag = a, api, env, use, tag
        self.bad: list[str] = []

    async def warm_up(self, bucket: str) -> None:
        """Runs that finish and one whose card is approved: the worker's code loaded."""
        api = self.api
        for i in range(3):
            rep = await api.result(await api.start(finished_plan(-i)))
            if rep.status != RunStatus.SUCCEEDED:
                raise SystemExit(f"warm-up run {rep.run_id} {rep.status}: {rep.failure}")
        warm = await api.start(waiting_plan(bucket, -1))
        card = await api.wait_for_card(warm, 1)
        await api.approve(warm, 1, card.digest, by=APPROVER)
        await api.result(warm)

    async def waiting(self, bucket: str) -> list[str]:
        """``--waiting`` runs to their cards; what they cost the worker while they wait."""
        a, api, use = self.a, self.api, self.use
        idle = use.rss()
        t0 = time.perf_counter()
        runs = await bounded(a.waiting, a.concurrency, lambda i: api.start(
            waiting_plan(bucket, i), run_id=f"scale-{self.tag}-w{i}"))
        submitted_s = time.perf_counter() - t0
        awaiting = runs_query(api.settings.temporal.task_queue, RunStatus.AWAITING_APPROVAL)
        seen = await until_counted(api, awaiting, a.waiting, 120 + 0.5 * a.waiting)
        reached_s = time.perf_counter() - t0
        await asyncio.sleep(5)
        held = use.rss()
        per_run = (held - idle) / 1024 / max(1, a.waiting)
        c0, w0 = use.cpu_s(), time.perf_counter()
        await asyncio.sleep(a.cpu_window)
        cpu, wall = use.cpu_s() - c0, time.perf_counter() - w0
        # then runs' reports, to know their cards wait (an evicted run is replayed for it): a
        # seeded sample of --checked (each one's report replays it: 10,000 take minutes)
        checked = sorted(random.Random(a.seed).sample(runs, min(a.checked, len(runs))))
        carded = await bounded(len(checked), 16, lambda i: has_card(api, checked[i]))
        self.bad += [f"{r}: {'no card waiting' if ok is False else ok}"
                     for r, ok in zip(checked, carded, strict=True) if ok is not True]
        if seen < a.waiting:
            self.bad.append(f"{a.waiting - seen} runs never awaited approval in visibility")
        return [
            f"waiting runs: {a.waiting} submitted in {submitted_s:.1f} s "
            f"({a.waiting / submitted_s:.0f} runs/s, {a.concurrency} at once); {seen} "
            f"awaiting_approval in visibility {reached_s:.1f} s after the first; "
            f"{sum(ok is True for ok in carded)} of {len(checked)} read afterwards with a pending "
            "card",
            f"worker RSS: {idle / 2**20:.0f} MB idle, {held / 2**20:.0f} MB with {a.waiting} "
            f"waiting: {per_run:.0f} KiB a waiting run   goal <= 30 KiB",
            f"worker CPU while they wait: {cpu:.2f} s in {wall:.0f} s "
            f"({cpu / wall:.4f} CPU s / s)   goal nil",
            f"worker RSS after each waiting run's report was read: {use.rss() / 2**20:.0f} MB",
        ]

    async def open_runs(self, page: PageReader, label: str) -> list[str]:
        """The card list, ``plangate runs`` and the approval page, timed: a line each."""
        n, env = self.a.waiting, self.env
        s, pending = await median(self.api.pending_approvals)
        cards = f"{len(pending.cards)} cards of {n} waiting, {pending.runs} runs read"
        cut = ", truncated" if pending.truncated else ""
        gone = f", {len(pending.unanswered)} unanswered" if pending.unanswered else ""
        out = [f"card list (pending_approvals), {label}: {s:.2f} s ({cards}{cut}{gone})"
               "   goal <= 1 s"]
        queue = self.api.settings.temporal.task_queue
        q = pending_query(queue, by_memo=True)
        s_raw, raw = await median(partial(server_pages, self.api, q))
        s_sdk, _ = await median(partial(listed, self.api, q))
        out.append(f"  beside it, its listing (runs awaiting approval): the server's pages alone "
                   f"{s_raw:.2f} s ({raw} runs), the SDK's list_workflows {s_sdk:.2f} s")
        every_open = (f'WorkflowType="{PLAN_RUN}" AND ExecutionStatus="Running" '
                      f"AND {visibility_clause(queue)}")
        s, runs = await median(partial(listed, self.api, every_open))
        out.append(f"  beside it, one visibility list of every open run (no report read): "
                   f"{s:.2f} s ({runs} runs)")
        for args in (("runs",), ("runs", "--status", "awaiting_approval"),
                     ("runs", "--status", "awaiting_approval", "--limit", str(n))):
            s, (text, err) = await median(partial(plangate_said, env, *args))
            said = f"; stderr: {err.strip()}" if err.strip() else " (from the runs index)"
            out.append(f"plangate {' '.join(args)}, {label}: {s:.2f} s ({lines(text)} lines"
                       f"{said})   goal about 1 s")
        out += await self.index_beside_temporal(label)
        s, (counted, shown, size, truncated) = await median(
            lambda: asyncio.to_thread(page.cards))
        cut = ", says only the first runs were read" if truncated else ""
        out.append(f"approval page (plangate ui, GET /), {label}: {s:.2f} s "
                   f"({counted} cards, {shown} shown, {size / 1024:.0f} KiB{cut})"
                   "   goal about 1 s")
        return out

    async def index_beside_temporal(self, label: str) -> list[str]:
        """The card list and the runs awaiting approval read from the runs index and from
        Temporal's visibility alone, alternating in this process, each the median of 3."""
        settings = self.api.settings
        world = World(settings.world)
        indexed = Plangate(self.api.client, settings, index=world)
        n = self.a.waiting
        kinds: dict[str, Callable[[], Awaitable[Any]]] = {
            "card list, index": indexed.pending_approvals,
            "card list, visibility": self.api.pending_approvals,
            "runs awaiting approval, index": partial(
                indexed.runs_listing, RunStatus.AWAITING_APPROVAL, n),
            "runs awaiting approval, visibility": partial(
                self.api.runs_listing, RunStatus.AWAITING_APPROVAL, n),
        }
        took: dict[str, list[float]] = {k: [] for k in kinds}
        said: dict[str, Any] = {}
        try:
            for _ in range(MEDIAN_OF):
                for k, fn in kinds.items():
                    s, said[k] = await timed(fn)
                    took[k].append(s)
        finally:
            await world.close()
        m = {k: statistics.median(v) for k, v in took.items()}
        cards, runs = said["card list, index"], said["runs awaiting approval, index"]
        each = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(
            took["card list, index"], took["card list, visibility"], strict=True))
        return [
            f"card list from the runs index, {label}: {m['card list, index']:.2f} s "
            f"({len(cards.cards)} cards, {cards.indexed} runs from the index, {cards.behind} "
            f"behind) beside visibility {m['card list, visibility']:.2f} s: "
            f"{m['card list, index'] / m['card list, visibility']:.2f}x   goal <= 1 s "
            f"(each of 3, index/visibility: {each})",
            f"runs awaiting approval from the runs index, {label}: "
            f"{m['runs awaiting approval, index']:.2f} s ({len(runs.runs)} runs, {runs.indexed} "
            f"from the index) beside visibility {m['runs awaiting approval, visibility']:.2f} s: "
            f"{m['runs awaiting approval, index'] / m['runs awaiting approval, visibility']:.2f}x",
        ]

    async def finished(self) -> list[str]:
        """``--finished`` one-step runs to their end, then ``plangate report`` over them."""
        a, api = self.a, self.api
        since = datetime.now(UTC)

        async def one(i: int) -> None:
            run_id = await api.start(finished_plan(i), run_id=f"scale-{self.tag}-f{i}")
            rep = await api.result(run_id)
            if rep.status != RunStatus.SUCCEEDED:
                self.bad.append(f"{run_id}: {rep.status} {rep.failure}")

        s, _ = await timed(lambda: bounded(a.finished, a.concurrency, one))
        out = [f"finished runs: {a.finished} in {s:.1f} s ({a.finished / s:.1f} runs/s, "
               f"{a.concurrency} in flight); worker RSS then {self.use.rss() / 2**20:.0f} MB"]
        # every one listed by visibility before the report is timed
        query = reporting.query(since, api.settings.temporal.task_queue)
        counted = await until_counted(api, query, a.finished, 300)
        first, text = await timed(lambda: plangate(self.env, "report"))
        took = [first]
        while first < ONCE_OVER_S and len(took) < MEDIAN_OF:
            took.append((await timed(lambda: plangate(self.env, "report")))[0])
        s_in, reps = await median(partial(reporting.finished_runs, api.client, since,
                                          api.settings.temporal.task_queue))
        s_list, _ = await median(partial(listed, api, query))
        s_raw, _ = await median(partial(server_pages, api, query))
        found = re.search(r"(\d+) finished runs", text)
        runs = int(found.group(1)) if found else -1
        s = statistics.median(took)
        how = f"median of {len(took)}" if len(took) > 1 else "once"
        out.append(f"plangate report: {s:.2f} s ({how}) over {runs} finished runs "
                   f"({counted} of this bench counted): {runs / s:.0f} runs/s"
                   "   goal <= 3 s over 10,000")
        out.append(f"  beside it, in this process: finished_runs (list + a result a run) "
                   f"{s_in:.2f} s over {len(reps)} runs; the server's pages alone "
                   f"{s_raw:.2f} s (the SDK's list_workflows, every field decoded: "
                   f"{s_list:.2f} s)")
        return out

    async def run(self, bucket: str, key: SigningKey, ui: TextIO) -> None:
        """Each phase's lines printed as it ends (a run that stops early keeps what it had)."""
        await self.warm_up(bucket)
        s, _ = await median(partial(plangate, self.env, "--help"))
        say([f"plangate --help (the CLI's own start, nothing asked of Temporal): {s:.2f} s"])
        await asyncio.sleep(3)
        say(await self.waiting(bucket))
        async with approval_page(self.env, ui) as url:
            page = await asyncio.to_thread(PageReader, url, key.login_token())
            say(await self.open_runs(page, f"{self.a.waiting} open"))
            if self.a.finished:
                say(await self.finished())
                say(await self.open_runs(
                    page, f"{self.a.waiting} open + {self.a.finished} finished"))
        say([f"worker RSS at the end: {self.use.rss() / 2**20:.0f} MB"])


def say(lines: list[str]) -> None:
    print("\n".join(lines), flush=True)


async def main(a: argparse.Namespace) -> int:
    tag = f"{random.Random(a.seed).getrandbits(32):08x}"  # the task queue's and runs' names
    key = SigningKey.generate(APPROVER)
    async with embedded_stack("scale") as stack:
        env = {**os.environ, **stack.env(), DEMO_SYSTEMS_VAR: "1", **approver_env([key]),
               "PLANGATE_TASK_QUEUE": f"scale-{tag}", "PYTHONUNBUFFERED": "1"}
        cache = {} if a.max_cached_runs is None else {
            "PLANGATE_MAX_CACHED_RUNS": str(a.max_cached_runs)}
        settings = Settings.from_env(env)
        api = Plangate(await connect(settings), settings)
        bucket = f"scale-{tag}"
        s3 = s3_client(env)
        s3.create_bucket(Bucket=bucket)
        s3.close()
        said = a.max_cached_runs if a.max_cached_runs is not None else (
            f"unset ({settings.temporal.max_cached_runs})")
        say([f"scale: {a.waiting} waiting, {a.finished} finished, one plangate worker process, "
             f"PLANGATE_MAX_CACHED_RUNS {said}, seed {a.seed}"])
        logs = Path(stack.state_dir)
        with (logs / "worker.log").open("a") as log, (logs / "ui.log").open("a") as ui:
            worker = WorkerProcess({**env, **cache}, log)
            await worker.start()
            assert worker.proc is not None
            bench = Scale(a, api, env, WorkerUse(worker.proc.pid), tag)
            try:
                await bench.run(bucket, key, ui)
            finally:
                await worker.kill(signal.SIGTERM)
    print(f"runs that went wrong: {len(bench.bad)}")
    for b in bench.bad[:10]:
        print(f"  {b}")
    return 1 if bench.bad else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--waiting", type=int, default=1000)
    ap.add_argument("--finished", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--concurrency", type=int, default=100, help="runs started at once")
    ap.add_argument("--cpu-window", type=float, default=20.0, help="seconds of CPU measured")
    ap.add_argument("--checked", type=int, default=1000,
                    help="waiting runs whose report is read afterwards (a seeded sample)")
    ap.add_argument("--max-cached-runs", type=int, default=None,
                    help="PLANGATE_MAX_CACHED_RUNS of the worker (default: unset, plangate's)")
    ap.add_argument("--throughput", action="store_true",
                    help="guarded against hand-written plans at once (issue 50), nothing else")
    ap.add_argument("--plans", type=int, default=1000, help="--throughput: plans at once")
    ap.add_argument("--steps", type=int, default=5, help="--throughput: steps a plan")
    ap.add_argument("--rounds", type=int, default=1, help="--throughput: rounds of both kinds")
    args = ap.parse_args()
    if args.throughput:
        from bench import _scale_throughput

        raise SystemExit(_scale_throughput.run(args))
    raise SystemExit(asyncio.run(main(args)))
