"""The executor the seeds' incidents happened under, kept for the demo's side-by-side replay:
no probes, retries every error three times (200, 400, 800 ms), then marks the step failed and
carries on with the next one. Do not use it for anything else."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from plangate.activities.tools.registry import CallContext, ToolSpec
from plangate.plans import bindings, jsonpath
from plangate.plans.model import Plan
from plangate.plans.words import many
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.runfiles import RunFiles
from plangate.world.scopes import run_scope


@dataclass
class NaiveRun:
    lines: list[str] = field(default_factory=list)
    failed: int = 0
    calls: int = 0

    @property
    def verdict(self) -> str:
        steps = len(self.lines)
        return (f"SUCCESS ({many(steps, 'step')}, {self.failed} failed, "
                f"{steps - self.failed} succeeded)")


Tools = Mapping[str, ToolSpec[Any]]


async def _call(world: World, spec: ToolSpec[Any], args: dict[str, Any], run: NaiveRun,
                files: RunFiles) -> Any:
    parsed = spec.args.model_validate(args)
    for delay in (0.2, 0.4, 0.8, None):
        run.calls += 1
        try:
            ctx = CallContext("naive", 0, uuid.uuid4().hex, files=files)
            return await spec.fn(parsed, world, ctx)
        except ToolError:
            if delay is None:
                raise
            await asyncio.sleep(delay)
    return None


async def run_naive(plan: Plan, world: World, tools: Tools) -> NaiveRun:
    """``plan`` with the deployment's ``tools`` on ``world``, as the naive executor ran it."""
    run = NaiveRun()
    bound: dict[str, Any] = {}
    # a directory of its own, as every run has (world.scopes), removed when it ends
    files = RunFiles(world.files, run_scope(f"naive/{uuid.uuid4().hex}", "naive"))
    try:
        for step in plan.steps:
            try:
                args = bindings.resolve(step.args, bound)
                out = await _call(world, tools[step.tool], args, run, files)
                for name, path in step.binds.items():
                    bound[name] = jsonpath.get(out, path)
                run.lines.append(f"step {step.n} {step.tool}: ok")
            except (ToolError, bindings.BindingError) as e:
                run.failed += 1
                run.lines.append(f"step {step.n} {step.tool}: {e} - retries exhausted, "
                                 "continuing")
    finally:
        await asyncio.to_thread(world.files.discard, files.scope)
    return run
