"""The report of a run that cannot give its own, read from its history: it has run no
workflow task, so nothing in it can answer a query, and it ended (if it did) with no report.

That is a run queued for later (it waits its delay), one just submitted that no worker has
taken yet, one cancelled before it began (terminated, plangate's ``CancelRequest`` in the
details; or terminated by Temporal's CLI or Web UI), and one that failed with no report (its
input refused). Two events of its history are read: the first (the input) and the last (how
it ended, if it did). A run terminated after it began, with no worker left to replay it, is
read the same way: its plan as queued."""

from __future__ import annotations

import contextlib
from datetime import UTC

from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHistoryEventFilterType,
)

from plangate.activities.catalogue import catalogue
from plangate.client.errors import UnknownRun
from plangate.client.handles import description, handle
from plangate.records.report import (
    Cancellation,
    RunReport,
    RunStatus,
    StepReport,
    StepState,
    StepTimings,
)
from plangate.records.run import CancelRequest, RunInput
from plangate.world.settings import Settings

CLOSE_EVENT = WorkflowHistoryEventFilterType.CLOSE_EVENT


async def report(
    client: Client, settings: Settings, run_id: str,
    desc: WorkflowExecutionDescription | None = None,
) -> RunReport:
    """Its plan, every step pending; cancelled, when it was cancelled before it began; void,
    with the failure as its escalation, when it failed with no report. ``desc``: its
    description, where the caller has read it already."""
    desc = desc or await description(client, run_id)
    h = handle(client, run_id)
    convert = client.data_converter
    inp: RunInput | None = None
    async for event in h.fetch_history_events(page_size=1):  # the first event: the input
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        (inp,) = await convert.decode(payloads, [RunInput])
        break
    cancellation: Cancellation | None = None
    failed: str | None = None
    # how it ended: asked only of a closed run (the server holds a close-event read of a
    # running one until it closes, or for its long poll: 20 s)
    if desc.status not in (None, WorkflowExecutionStatus.RUNNING):
        async for event in h.fetch_history_events(event_filter_type=CLOSE_EVENT):  # how it ended
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
                failure = event.workflow_execution_failed_event_attributes.failure
                error = await convert.decode_failure(failure)
                failed = f"the run failed with no report: {getattr(error, 'message', error)}"
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
                terminated = event.workflow_execution_terminated_event_attributes
                details = terminated.details.payloads
                req: CancelRequest | None = None
                with contextlib.suppress(Exception):  # details not plangate's: none to read
                    (req,) = await convert.decode(details, [CancelRequest]) if details else (None,)
                # terminated by other means (Temporal's CLI or Web UI): its reason, no requester
                cancellation = Cancellation(
                    reason=req.reason if req is not None else terminated.reason,
                    requester=req.requester if req is not None else terminated.identity,
                    at=event.event_time.ToDatetime(UTC),
                )
    if inp is None:
        raise UnknownRun(f"run {run_id!r} has no history")
    plan = inp.plan
    cat = catalogue(settings.catalogue)
    ended = cancellation is not None or failed is not None
    status, state = RunStatus.QUEUED, StepState.PENDING
    if cancellation is not None:
        status, state = RunStatus.CANCELLED, StepState.CANCELLED
    elif failed is not None:
        status, state = RunStatus.FAILED, StepState.VOID
    return RunReport(
        run_id=run_id, goal=plan.goal, replans_max=plan.budget.replans_max,
        status=status, escalation=failed,
        starts_at=None if ended else desc.execution_time, cancellation=cancellation,
        steps=[
            StepReport(
                n=s.n, tool=s.tool, plan_version=1, effect=cat.effect_of(s.tool, s.effect),
                state=state,
                timings=StepTimings(plan_made_at=inp.plan_made_at or desc.start_time),
            )
            for s in plan.steps
        ],
    )
