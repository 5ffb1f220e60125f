"""Running one plan version: steps start when their dependencies are done, independent steps
run concurrently, and after a final failure nothing more is dispatched (the rest is VOID).

When the run must continue as new (``VersionContext.parking``), nothing new starts either: the
steps in flight stop at their next safe point and the version returns them as ``parked``; the
next run of the chain resumes it from them (``Resumed``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

from temporalio import workflow

from plangate.records.report import FailureRecord, StepState
from plangate.records.run import Parked
from plangate.workflows.context import VersionContext
from plangate.workflows.machine import StepOutcome, StepRunner

_SUCCEEDED = (StepState.DONE, StepState.SKIPPED)


@dataclass(frozen=True)
class VersionOutcome:
    failure: FailureRecord | None
    failed_state: StepState | None = None  # REPLANNING or HALTED
    # the run continues as new before the version ends: it goes on, from ``parked``, there
    suspended: bool = False
    parked: list[Parked] = field(default_factory=list)


@dataclass(frozen=True)
class Resumed:
    """A version an earlier run of the chain began: its parked steps and its failure so far."""

    parked: list[Parked]
    failure: FailureRecord | None = None
    failed_state: StepState | None = None


async def execute_version(ctx: VersionContext, resumed: Resumed | None = None) -> VersionOutcome:
    tasks: dict[int, asyncio.Task[StepOutcome]] = {}
    settled: set[int] = set()  # steps that ended in an earlier run of the chain
    failure: StepOutcome | None = None
    if resumed is not None:
        by_n = {s.n: s for s in ctx.plan.steps}
        for p in resumed.parked:
            tasks[p.n] = asyncio.create_task(StepRunner(ctx, by_n[p.n], resume=p).run())
        settled = {s.n for s in ctx.plan.steps if ctx.state(s.n).final} - set(tasks)
        if resumed.failure is not None and resumed.failed_state is not None:
            f = resumed.failure
            failure = StepOutcome(f.step, resumed.failed_state, f)
            _void_the_rest(ctx, tasks, settled)
    while True:
        if failure is None and not ctx.over_bound():
            for step in ctx.plan.steps:
                if (
                    step.n not in tasks
                    and step.n not in settled
                    and all(ctx.state(d) in _SUCCEEDED for d in step.depends_on)
                ):
                    tasks[step.n] = asyncio.create_task(StepRunner(ctx, step).run())
        running = [t for t in tasks.values() if not t.done()]
        if not running:
            break
        try:
            await workflow.wait(running, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The run was cancelled: in-flight steps (and their activities) are cancelled too.
            await _stop(running)
            raise
        for t in tasks.values():
            crash = t.exception() if t.done() and not t.cancelled() else None
            if crash is not None:  # not a failed step: a bug, which fails the run (plan_run)
                await _stop(t for t in tasks.values() if not t.done())
                raise crash
            if t.done() and failure is None and not t.result().ok:
                failure = t.result()
                _void_the_rest(ctx, tasks, settled)
    parked = [o.parked for t in tasks.values() if (o := t.result()).parked is not None]
    unstarted = _unstarted(ctx, tasks, settled)
    if parked or (ctx.parking and failure is None and unstarted):
        if failure is None:
            return VersionOutcome(None, None, True, parked)
        return VersionOutcome(failure.failure, failure.state, True, parked)
    for n in unstarted:
        if ctx.state(n) is not StepState.VOID:  # VOID already at the failure
            ctx.set_state(n, StepState.VOID)
    if failure is None:
        if never := unstarted:  # a dependency never met: nothing ran, nothing succeeded
            raise RuntimeError(f"steps {never} could never start: their dependencies never ended")
        return VersionOutcome(None)
    return VersionOutcome(failure.failure, failure.state)


def _void_the_rest(
    ctx: VersionContext, tasks: dict[int, asyncio.Task[StepOutcome]], settled: set[int]
) -> None:
    """At a final failure: what will never be dispatched is VOID now, not when the steps still
    in flight have ended, so a step in flight waiting for one of them (a pre condition that
    step owes, ``probing.wait_for_owner``) stops waiting instead of waiting out its hour."""
    for n in _unstarted(ctx, tasks, settled):
        ctx.set_state(n, StepState.VOID)


def _unstarted(
    ctx: VersionContext, tasks: dict[int, asyncio.Task[StepOutcome]], settled: set[int]
) -> list[int]:
    return [s.n for s in ctx.plan.steps if s.n not in tasks and s.n not in settled]


async def _stop(running: Iterable[asyncio.Task[StepOutcome]]) -> None:
    pending = list(running)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
