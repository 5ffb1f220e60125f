"""One embedded stack and worker for a benchmark run, through ``plangate.testing`` (the same
worker assembly, the same way of running a plan as the tests)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from plangate.client.connection import connect
from plangate.records.report import RunReport
from plangate.records.signing import SigningKey
from plangate.testing import Harness, embedded_stack, running_worker
from plangate.world.clients import World
from plangate.world.settings import APPROVE_EFFECTS_VAR, DEMO_SYSTEMS_VAR, Replanner, Settings

# the approvers a bench answers cards as (bench.approval, bench.replan; bench.fuzz as "fuzz")
APPROVER_NAMES = ("bench", "fuzz")


@dataclass
class Bench(Harness):
    world: World
    database_url: str
    env: dict[str, str]  # the stack's environment, as a process on it needs it


@asynccontextmanager
async def bench_stack(
    doubles: Mapping[str, Callable[..., Any]] = {},
    replanner: Replanner | None = None,
    env: Mapping[str, str] = {},
) -> AsyncIterator[Bench]:
    """``env``: variables of the deployment beyond the stack's own (the worker and the
    settings read them)."""
    # Scripted failures are the point of some benchmarks; their tracebacks are noise here.
    logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    async with embedded_stack("bench") as stack:
        # approval by effect off unless a benchmark asks (``env``): what they measure runs
        # money and external steps without a card; the approvals bench asks for its own
        stack_env = {**stack.env(), DEMO_SYSTEMS_VAR: "1", APPROVE_EFFECTS_VAR: "none", **env}
        # the benchmarks replay the seeds' incidents: the demo systems on, as a user would
        # the approvers a bench answers cards as: the worker knows them, the client signs
        keys = tuple(SigningKey.generate(name) for name in APPROVER_NAMES)
        s = Settings.from_env(stack_env)
        settings = replace(
            s,
            temporal=replace(s.temporal, task_queue=f"bench-{uuid.uuid4().hex[:8]}"),
            policy=replace(s.policy, approvers=tuple((k.name, k.public) for k in keys)),
            identity=replace(s.identity, approver_keys=keys),
            model=replace(s.model, replanner=replanner or s.model.replanner),
        )
        world = World(settings.world)
        client = await connect(settings)
        async with running_worker(client, settings, doubles, world) as h:
            yield Bench(h.client, h.settings, world, stack.database_url, stack_env)
        await world.close()

async def concurrent_runs(
    h: Harness, bodies: list[dict[str, Any]]
) -> tuple[float, list[RunReport]]:
    """``bodies`` started at once: the seconds from the start to the last one's end, and their
    reports; every run must succeed."""
    t0 = time.perf_counter()
    reports = await asyncio.gather(*(h.run(body) for body in bodies))
    elapsed = time.perf_counter() - t0
    bad = [r for r in reports if r.status != "succeeded"]
    if bad:
        why = "; ".join(f"{r.run_id} {r.status}: {r.failure}" for r in bad[:3])
        raise SystemExit(f"{len(bad)} runs did not succeed: {why}")
    return elapsed, reports


async def concurrent_steps_per_s(
    h: Harness, plans: int, make: Callable[[], dict[str, Any]]
) -> float:
    """Steps per second of ``plans`` plans (each made by ``make``) started at once, from the
    start to the last one's end; every run must succeed."""
    bodies = [make() for _ in range(plans)]
    elapsed, _ = await concurrent_runs(h, bodies)
    return sum(len(b["steps"]) for b in bodies) / elapsed
