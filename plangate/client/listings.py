"""Listing runs through Temporal's visibility: the runs of a task queue (in a status), and
whether the namespace has plangate's search attributes to find them by."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.workflow.v1 import WorkflowExecutionInfo
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.converter import decode_typed_search_attributes
from temporalio.service import RPCError

from plangate.client.errors import SearchAttributesMissing
from plangate.client.paging import pages
from plangate.client.reports import CLOSED_STATUS
from plangate.records import placement, visibility
from plangate.records.interface import PLAN_RUN
from plangate.records.report import RunStatus


@dataclass(frozen=True)
class Listed:
    """A run as visibility lists it (``Plangate.runs``)."""

    run_id: str
    status: str  # a RunStatus value (``unknown`` where the attributes are missing)
    goal: str
    started_at: datetime
    closed_at: datetime | None


@dataclass(frozen=True)
class RunsListing:
    """``Plangate.runs_listing``: the runs, how many came from the runs index, and why the
    rest were listed from Temporal (None: nothing to say)."""

    runs: list[Listed]
    indexed: int
    note: str | None


_FINAL_VALUES = {s.value for s in RunStatus if s.final}


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# A run that did not succeed ends its execution Failed (runs from before the ``truthful-end``
# patch: Completed); its PlangateStatus says how.
_UNSUCCESSFUL = '("Completed", "Failed")'
_EXECUTION = {  # how a RunStatus is found: the execution's own status, then plangate's
    RunStatus.QUEUED: '("Running")', RunStatus.RUNNING: '("Running")',
    RunStatus.AWAITING_APPROVAL: '("Running")', RunStatus.SUCCEEDED: '("Completed")',
    RunStatus.HALTED: _UNSUCCESSFUL, RunStatus.CANCELLED: _UNSUCCESSFUL,
    RunStatus.FAILED: _UNSUCCESSFUL,
}
_ENDED_BY_TEMPORAL = {  # ended without the workflow's own last word (terminated, timed out)
    RunStatus.CANCELLED: 'ExecutionStatus IN ("Canceled", "Terminated")',
    # failed without a report of its own to say how (its input refused): not a run that
    # failed its execution to say it halted or was cancelled
    RunStatus.FAILED: 'ExecutionStatus = "TimedOut" OR (ExecutionStatus = "Failed" AND '
    'PlangateStatus NOT IN ("halted", "cancelled", "failed"))',
}


def _stamp(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def runs_query(task_queue: str, status: RunStatus | None = None, *,
               plan_runs_only: bool = False, since: datetime | None = None,
               unindexed: bool = False) -> str:
    """The visibility query for the runs on ``task_queue`` and its catalogue queues (in
    ``status``). Each execution of a run that continued as new is left out but the latest. A
    run's PlangateStatus is its last word: a run Temporal ended (terminated, timed out) is
    found by its execution status. ``plan_runs_only``: the team workflows plangate guards
    left out, and the runs queued (what the runs index holds; ``since``: started then or
    after); ``unindexed``: those two alone (what it does not)."""
    ours = f'WorkflowType = "{PLAN_RUN}" AND {placement.visibility_clause(task_queue)}'
    queued = f'{visibility.STATUS.name} = "{RunStatus.QUEUED.value}"'
    if plan_runs_only:
        q = f"({ours} AND {visibility.STATUS.name} != \"{RunStatus.QUEUED.value}\")"
        if since is not None:
            q += f' AND StartTime >= "{_stamp(since)}"'
    elif unindexed:
        # (a run queued, then ended by Temporal before it began, keeps ``queued``: no row)
        q = f"(({ours} AND {queued}) OR {visibility.GUARDED})"
    else:
        q = f"(({ours}) OR {visibility.GUARDED})"
    if status is None:
        return q + ' AND ExecutionStatus != "ContinuedAsNew"'
    own = f"ExecutionStatus IN {_EXECUTION[status]} AND {visibility.STATUS.name} = " + _quoted(
        status.value
    )
    if status in _ENDED_BY_TEMPORAL:
        return f"{q} AND (({own}) OR {_ENDED_BY_TEMPORAL[status]})"
    return f"{q} AND {own}"


async def registered(client: Client) -> bool:
    """Whether the client's namespace has plangate's search attributes, with their types (a
    server that cannot say, such as the time-skipping test server, has not)."""
    request = ListSearchAttributesRequest(namespace=client.namespace)
    try:
        have = await client.operator_service.list_search_attributes(request)
    except RPCError:
        return False
    custom = dict(have.custom_attributes)
    return all(custom.get(k.name) == int(k.indexed_value_type) for k in visibility.KEYS)


async def runs(
    client: Client, task_queue: str, registered: bool, status: RunStatus | None, limit: int,
    *, unindexed: bool = False,
) -> list[Listed]:
    """The runs on ``task_queue`` (in ``status``), ``limit`` at most, newest first;
    ``unindexed``: only those the runs index does not hold (``runs_query``)."""
    if status is not None and not registered:
        names = ", ".join(f"{n} ({t})" for n, t in visibility.registration())
        raise SearchAttributesMissing(
            f"namespace {client.namespace} has no search attributes "
            f"{names}: register them to list runs by status (docs/watching.md)"
        )
    out: list[Listed] = []
    # ``limit`` counted after another deployment's guarded workflows are left out; the pages
    # as the server sends them, only the search attributes decoded (the SDK's list_workflows
    # decodes every memo too: the cards a waiting run shows, 10,000 of them a second and more)
    query = runs_query(task_queue, status, unindexed=unindexed)
    async for page in pages(client, query, limit):
        for e in page:
            if len(out) >= limit:
                return newest_first(out)
            got = listed(e, task_queue)
            if got is not None:  # (None: a team's guarded workflow of another deployment)
                out.append(got)
    return newest_first(out)


def listed(e: WorkflowExecutionInfo, task_queue: str) -> Listed | None:
    """The run as visibility lists it; None for a team's guarded workflow of another
    deployment."""
    sa = decode_typed_search_attributes(e.search_attributes)
    if e.type.name != PLAN_RUN and not visibility.answers_to(sa.get(visibility.GOAL), task_queue):
        return None
    ended = CLOSED_STATUS.get(WorkflowExecutionStatus(e.status).name) if e.status else None
    said = sa.get(visibility.STATUS)
    # a run's own last word when it had one (a halted run's execution failed too)
    if said is not None and said in _FINAL_VALUES:
        shown = said
    else:
        shown = ended.value if ended is not None else said or "unknown"
    return Listed(
        run_id=e.execution.workflow_id, status=shown,
        goal=sa.get(visibility.GOAL) or "", started_at=e.start_time.ToDatetime(UTC),
        closed_at=e.close_time.ToDatetime(UTC) if e.HasField("close_time") else None,
    )


def newest_first(runs: list[Listed]) -> list[Listed]:
    """By start, newest first: the server lists the open runs before the closed ones, so an
    hour-old run waiting for a card came above the one just submitted."""
    return sorted(runs, key=lambda r: (r.started_at, r.run_id), reverse=True)
