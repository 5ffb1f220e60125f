"""One embedded stack and worker for a benchmark run."""

from __future__ import annotations

import logging
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from activities.bootstrap import ensure_schema
from activities.catalogue import check_plan
from plangate import runs
from plangate.stack import EmbeddedStack
from plangate.worker_factory import WORKFLOWS, activities_for, connect
from plans.load import parse_plan
from records.report import RunReport
from world.clients import World
from world.settings import Settings


@dataclass
class Bench:
    client: Client
    settings: Settings
    world: World
    database_url: str

    async def run(self, body: dict[str, Any]) -> RunReport:
        plan = check_plan(parse_plan(body), self.settings)
        return await (await runs.start(self.client, self.settings, plan)).result()


@asynccontextmanager
async def bench_stack(
    replace_activities: Sequence[Callable[..., Any]] = (),
    **overrides: Any,
) -> AsyncIterator[Bench]:
    # Scripted failures are the point of some benchmarks; their tracebacks are noise here.
    logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        async with EmbeddedStack(tmp, ui=False) as stack:
            env = stack.env()
            os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
            settings = replace(
                Settings.from_env(env), task_queue=f"bench-{uuid.uuid4().hex[:8]}", **overrides
            )
            world = World(settings)
            await ensure_schema(world)
            client = await connect(settings)
            doubles = {
                getattr(a, "__temporal_activity_definition").name: a for a in replace_activities
            }
            acts = [
                doubles.get(getattr(a, "__temporal_activity_definition").name, a)
                for a in activities_for(world)
            ]
            async with Worker(
                client, task_queue=settings.task_queue, workflows=WORKFLOWS, activities=acts
            ):
                yield Bench(client, settings, world, stack.database_url)
            await world.close()
