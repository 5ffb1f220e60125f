"""Builds the worker: every workflow and every activity, on the configured task queue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from activities.bootstrap import ensure_schema
from activities.probe_activity import ProbeActivities
from activities.tool_activity import tool_activities
from replanner.activity import ReplanActivities
from replanner.review import ReviewActivities
from replanner.workflow import ReplanWorkflow
from workflows.plan_run import PlanRunWorkflow
from world.clients import World
from world.settings import Settings

WORKFLOWS: list[type] = [PlanRunWorkflow, ReplanWorkflow]


async def connect(settings: Settings) -> Client:
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=pydantic_data_converter,
    )


def activities_for(world: World) -> list[Callable[..., Any]]:
    return [
        ProbeActivities(world).evaluate,
        *tool_activities(world),
        ReplanActivities(world.settings).propose,
        ReviewActivities(world.settings).review,
    ]


async def build_worker(client: Client, settings: Settings, world: World | None = None) -> Worker:
    world = world or World(settings)
    settings.workdir.mkdir(parents=True, exist_ok=True)
    await ensure_schema(world)
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=WORKFLOWS,
        activities=activities_for(world),
        max_concurrent_activities=32,
    )
