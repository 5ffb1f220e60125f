"""A run by its id: its Temporal handle, its description (``UnknownRun`` where the namespace
has no run of that id), and whether it is the deployment's."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowExecutionDescription, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from plangate.client.errors import UnknownRun
from plangate.records import placement, visibility
from plangate.records.interface import PLAN_RUN
from plangate.records.report import RunReport


def handle(client: Client, run_id: str) -> WorkflowHandle[Any, RunReport]:
    """The handle of the run's latest execution (a chain that continued as new: its last)."""
    return client.get_workflow_handle(run_id, result_type=RunReport)


async def description(client: Client, run_id: str) -> WorkflowExecutionDescription:
    try:
        return await handle(client, run_id).describe()
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise UnknownRun(
                f"no run with id {run_id!r} in namespace {client.namespace}"
            ) from None
        raise


async def of_deployment(client: Client, run_id: str, task_queue: str) -> bool:
    """Whether the run is on ``task_queue`` or one of its catalogue queues (or a team's
    workflow plangate guards)."""
    desc = await description(client, run_id)
    if desc.workflow_type != PLAN_RUN:
        # a team's workflow whose activities plangate guards: on the team's queue, listed
        # by the attributes its guard sets (``plangate.temporal``)
        sa = desc.typed_search_attributes
        return sa.get(visibility.STATUS) is not None and visibility.answers_to(
            sa.get(visibility.GOAL), task_queue
        )
    return placement.of_deployment(desc.task_queue, task_queue)
