"""Plan fuzzing, the full run (issue 12, part 2): hypothesis-drawn plans through ``plangate
check`` and the Python API, then drawn plans through ``plangate check`` and ``plangate run`` on a
real worker, each accepted one followed to its end (``tests/plan_fuzz.py`` says what is drawn
and how each plan is judged).

    .venv/bin/python -m bench.fuzz [--checks 10000] [--runs 400] [--seed 0] [--concurrency 4]

Prints the figures: examples, accepted, rejected (by the error raised and the kind of its first
problem), runs started and their final states, runs refused by ``run`` as by ``check`` (no
workflow), crashes (an exception that is no ``PlanError``, an exit code that is neither 0 nor 2,
a failed workflow task, an internal error), hangs, wrong answers, panics the worker's Temporal
core printed, and the wall time of each part. A finding does not stop the run: each is written
to ``--out`` (the plan as plangate received it, and what was wrong), for
``tests/fuzz_corpus/``. Exit code 1 if there was any.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from hypothesis import HealthCheck, Phase, given, seed, settings

from bench._stack import Bench, bench_stack
from plangate.dev.stack import environment
from plangate.records.options import PROBE
from plangate.world.settings import DEMO_SYSTEMS_VAR, Settings
from tests.plan_fuzz import (
    CRASH,
    HANG,
    LEFT_OUT,
    REFUSED,
    Document,
    Finding,
    Tally,
    check_then_run,
    documents,
    drawn_runs,
    judge_check,
    seed_world,
)

F = TypeVar("F", bound=Callable[..., None])
PANIC = "panicked at"
SLOW_TASK = "TMPRL1104"  # the worker's warning: a workflow task took more than 5 s


def _settings(examples: int, at: int) -> Callable[[F], F]:
    """``examples`` drawn from seed ``at``, generated only (a finding is recorded, not raised:
    nothing to shrink), no example database, every health check off (plans are big on purpose)."""

    def apply(fn: F) -> F:
        drawn: F = settings(
            max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )(seed(at)(fn))
        return drawn

    return apply


class Findings:
    """Every finding, written to ``out`` as it comes."""

    def __init__(self, out: Path, tally: Tally) -> None:
        self.out, self.tally = out, tally
        out.mkdir(parents=True, exist_ok=True)

    def add(self, doc: Document, e: Finding) -> None:
        i = len(self.tally.findings) + 1
        self.tally.findings.append((e.kind, str(e)))
        body = doc.data if doc.form != "api" else repr(doc.mapping).encode()
        suffix = doc.suffix if doc.form != "api" else ".api.txt"
        (self.out / f"finding-{i}{suffix}").write_bytes(body)
        (self.out / f"finding-{i}.txt").write_text(f"{e.kind} ({doc.form}): {e}\n")
        print(f"  finding {i}, {e.kind} ({doc.form}): {str(e)[:300]}", flush=True)


class Slowest:
    """The slowest check and the plan it was (written to ``out`` at the end)."""

    def __init__(self) -> None:
        self.s, self.doc = 0.0, Document("json")

    def saw(self, took: float, doc: Document) -> None:
        if took > self.s:
            self.s, self.doc = took, doc

    def describe(self) -> str:
        size = len(self.doc.data) if self.doc.form != "api" else len(repr(self.doc.mapping))
        return f"{self.s:.2f} s ({self.doc.form}, {size:,} bytes)"


def check_part(
    count: int, at: int, directory: Path, tally: Tally, found: Findings, slowest: Slowest
) -> None:
    env = {"PLANGATE_WORKDIR": str(directory / "work"), DEMO_SYSTEMS_VAR: "1"}
    with environment(env):
        s = Settings.from_env(os.environ)

        @_settings(count, at)
        @given(doc=documents())
        def check_one(doc: Document) -> None:
            tally.checked += 1
            tally.forms[doc.form] += 1
            problems: list[str] = []
            t0 = time.perf_counter()
            try:
                plan = judge_check(doc, directory, s, problems)
            except Finding as e:
                found.add(doc, e)
                return
            finally:
                slowest.saw(time.perf_counter() - t0, doc)
            if plan is None:
                tally.reject(problems)
            else:
                tally.accepted += 1

        check_one()


def cli_env(b: Bench) -> dict[str, str]:
    """What ``plangate`` needs to reach the bench's stack and worker."""
    t, w = b.settings.temporal, b.settings.world
    return {
        "TEMPORAL_ADDRESS": t.address, "TEMPORAL_NAMESPACE": t.namespace,
        "PLANGATE_DATABASE_URL": w.database_url,
        "PLANGATE_S3_ENDPOINT_URL": w.s3_endpoint_url or "",
        "PLANGATE_TASK_QUEUE": t.task_queue, "PLANGATE_WORKDIR": str(w.workdir),
        DEMO_SYSTEMS_VAR: "1", "TEMPORAL_CONFIG_FILE": "/dev/null",
    }


@contextlib.contextmanager
def stderr_kept() -> Iterator[Path]:
    """File descriptor 2 (where the worker's Temporal core, written in Rust, prints a panic)
    into a file while the block runs; afterwards the file is copied to the real stderr, so
    nothing is hidden, and it stays readable."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd, name = tempfile.mkstemp(prefix="plangate-fuzz-stderr-", suffix=".txt")
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield Path(name)
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        sys.stderr.write(Path(name).read_text(errors="replace"))
        sys.stderr.flush()


async def run_part(
    drawn: list[tuple[Document, list[bool]]], concurrency: int, directory: Path, tally: Tally,
    found: Findings, stderr: Path, notes: Counter[str],
) -> tuple[int, int, int]:
    """Each drawn plan checked, then run (or refused by run too). Returns how many were left
    out as too slow to run, and the panics on stderr while the runs went and while the stack
    stopped."""
    slow = 0
    gate = asyncio.Semaphore(concurrency)
    async with bench_stack() as b:
        await seed_world(b.world)
        with environment(cli_env(b)):

            async def one(i: int, doc: Document, answers: list[bool]) -> None:
                nonlocal slow
                where = directory / f"run-{i}"
                where.mkdir()
                async with gate:
                    try:
                        end = await check_then_run(doc, where, b.client, b.settings, answers,
                                                   notes)
                    except Finding as e:
                        found.add(doc, e)
                        return
                if end == LEFT_OUT:
                    slow += 1
                elif end == REFUSED:
                    tally.run_refused += 1
                else:
                    tally.ran += 1
                    tally.statuses[end] += 1

            await asyncio.gather(*(one(i, d, a) for i, (d, a) in enumerate(drawn)))
        during = _count(stderr, PANIC)
    return slow, during, _count(stderr, PANIC) - during


def _count(stderr: Path, what: str) -> int:
    sys.stderr.flush()
    return stderr.read_text(errors="replace").count(what)


def _counts(c: Counter[str]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in c.most_common())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checks", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None, help="where findings are written")
    a = ap.parse_args()
    tally = Tally()
    slowest = Slowest()
    with tempfile.TemporaryDirectory(prefix="plangate-fuzz-") as tmp:
        out = a.out or Path(tmp) / "findings"
        found = Findings(out, tally)
        t0 = time.perf_counter()
        check_part(a.checks, a.seed, Path(tmp), tally, found, slowest)
        t_check = time.perf_counter() - t0
        print(f"check part: {tally.line()} in {t_check:.0f} s", flush=True)
        checked = tally.checked
        t1 = time.perf_counter()
        drawn = drawn_runs(a.runs, a.seed)
        notes: Counter[str] = Counter()
        with stderr_kept() as stderr:
            slow, panics_running, panics_stopping = asyncio.run(
                run_part(drawn, a.concurrency, Path(tmp), tally, found, stderr, notes)
            )
            t_run = time.perf_counter() - t1
            # a local activity's start-to-close timer (30 s) outlives a worker that stopped
            # (temporalio's core then panics on sending its timeout): wait to count them all
            time.sleep(PROBE.start_to_close_timeout.total_seconds() + 5)
            panics_after = _count(stderr, PANIC) - panics_running - panics_stopping
            slow_tasks = _count(stderr, SLOW_TASK)
        kinds = Counter(kind for kind, _ in tally.findings)
        print(f"\nplan fuzzing, seed {a.seed}")
        print(f"  examples: {checked + len(drawn):,} ({checked:,} through check and the API: "
              f"{_counts(tally.forms)}; {len(drawn):,} through check and run)")
        print(f"  check part: {tally.accepted:,} accepted, {tally.rejected.total():,} rejected "
              f"({_counts(tally.errors)})")
        for kind, n in tally.rejected.most_common():
            print(f"    {n:6,}  {kind}")
        forms = Counter(d.form for d, _ in drawn)
        print(f"  run part: {len(drawn):,} drawn ({_counts(forms)}): {tally.ran:,} started and "
              f"ended ({_counts(tally.statuses)}), {tally.run_refused:,} refused by check and "
              f"run alike (no workflow started), {slow} left out as too slow to run")
        print(f"  crashes: {kinds[CRASH]} (CLI, API, worker, workflow tasks, internal errors); "
              f"hangs: {kinds[HANG]}; all findings: {len(tally.findings)}")
        print(f"  Temporal core panics on stderr: {panics_running} while the runs went, "
              f"{panics_stopping} while the worker and stack stopped, {panics_after} in the "
              f"{PROBE.start_to_close_timeout.total_seconds() + 5:.0f} s after; workflow tasks "
              f"over 5 s: {slow_tasks}, timed out: {notes['workflow tasks timed out']}")
        print(f"  wall time: check part {t_check:.0f} s, run part {t_run:.0f} s, total "
              f"{t_check + t_run:.0f} s; slowest check {slowest.describe()}")
        if tally.findings:
            print(f"{len(tally.findings)} findings written to {out} (kept with --out)")
            if a.out is None:
                for kind, f in tally.findings:
                    print(f"  {kind}: {f[:300]}")
            raise SystemExit(1)


if __name__ == "__main__":
    main()
