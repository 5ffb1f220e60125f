"""Starting runs and reading their reports through a Temporal client."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError

from activities.catalogue import catalogue
from plans.guards import guard
from plans.model import Plan
from records.report import RunReport, RunStatus
from records.run import RunInput
from workflows.plan_run import PlanRunWorkflow
from world.settings import Settings

_CLOSED_STATUS = {
    WorkflowExecutionStatus.CANCELED: RunStatus.CANCELLED,
    WorkflowExecutionStatus.TERMINATED: RunStatus.CANCELLED,
    WorkflowExecutionStatus.FAILED: RunStatus.FAILED,
    WorkflowExecutionStatus.TIMED_OUT: RunStatus.FAILED,
}


def new_run_id() -> str:
    return f"plan-{uuid.uuid4().hex[:12]}"


async def start(
    client: Client, settings: Settings, plan: Plan, run_id: str | None = None
) -> WorkflowHandle[PlanRunWorkflow, RunReport]:
    return await client.start_workflow(
        PlanRunWorkflow.run,
        RunInput(plan=guard(plan, catalogue(settings)), plan_made_at=datetime.now(UTC)),
        id=run_id or new_run_id(),
        task_queue=settings.task_queue,
    )


def handle_for(client: Client, run_id: str) -> WorkflowHandle[PlanRunWorkflow, RunReport]:
    return client.get_workflow_handle_for(PlanRunWorkflow.run, run_id)


async def report(client: Client, run_id: str) -> RunReport:
    handle = handle_for(client, run_id)
    desc = await handle.describe()
    if desc.status == WorkflowExecutionStatus.COMPLETED:
        return await handle.result()
    rep = await handle.query(PlanRunWorkflow.report)
    if desc.status in _CLOSED_STATUS:
        rep.status = _CLOSED_STATUS[desc.status]
    return rep


async def follow(
    client: Client,
    run_id: str,
    on_change: Callable[[RunReport], None] | None = None,
    every_s: float = 0.5,
) -> RunReport:
    """Wait for the run to end, calling ``on_change`` whenever a step changes state."""
    handle = handle_for(client, run_id)
    seen: tuple[tuple[int, int, str], ...] = ()
    result = asyncio.ensure_future(handle.result())
    try:
        while not result.done():
            if on_change is not None:
                try:
                    rep = await handle.query(PlanRunWorkflow.report)
                except RPCError:
                    rep = None
                if rep is not None:
                    now = tuple((s.plan_version, s.n, s.state.value) for s in rep.steps)
                    if now != seen:
                        seen = now
                        on_change(rep)
            await asyncio.wait([result], timeout=every_s)
        return result.result()
    except Exception:
        # Cancelled or failed in Temporal: the report is still there to read.
        return await report(client, run_id)
    finally:
        result.cancel()
