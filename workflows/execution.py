"""Running one plan version: steps start when their dependencies are done, independent steps
run concurrently, and after a final failure nothing more is dispatched (the rest is VOID)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from records.report import FailureRecord, StepState
    from workflows.context import VersionContext
    from workflows.lifecycle import StepOutcome, StepRunner

_SUCCEEDED = (StepState.DONE, StepState.SKIPPED)


@dataclass(frozen=True)
class VersionOutcome:
    failure: FailureRecord | None
    failed_state: StepState | None = None  # REPLANNING or HALTED


async def execute_version(ctx: VersionContext) -> VersionOutcome:
    tasks: dict[int, asyncio.Task[StepOutcome]] = {}
    failure: StepOutcome | None = None
    while True:
        if failure is None:
            for step in ctx.plan.steps:
                if step.n not in tasks and all(ctx.state(d) in _SUCCEEDED for d in step.depends_on):
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
    for step in ctx.plan.steps:
        if step.n not in tasks:
            ctx.set_state(step.n, StepState.VOID)
    if failure is None:
        never = [s.n for s in ctx.plan.steps if s.n not in tasks]
        if never:  # a dependency that can never be met: nothing ran, nothing succeeded
            raise RuntimeError(f"steps {never} could never start: their dependencies never ended")
        return VersionOutcome(None)
    return VersionOutcome(failure.failure, failure.state)


async def _stop(running: Iterable[asyncio.Task[StepOutcome]]) -> None:
    pending = list(running)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
