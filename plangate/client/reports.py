"""A run's report, as the run gives it: its ``report`` query while it runs, its result (or,
a run that did not succeed, the details of its failure) once it has ended. Only a run that
cannot answer is read from its history (``unbegun``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from plangate.client import unbegun
from plangate.client.errors import NoWorkerAnswered
from plangate.client.handles import description, handle
from plangate.errors import RunError
from plangate.records.interface import ENDED_ERRORS, PLAN_RUN, REPORT_QUERY
from plangate.records.report import RunReport, RunStatus, StepState
from plangate.world.settings import Settings

REPORT_QUERY_TIMEOUT = timedelta(seconds=10)  # a worker answers a query at once, or is gone
# a query no worker answered in time: the client's deadline (CANCELLED, "Timeout expired"),
# or the server's
NO_ANSWER = (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED)

CLOSED_STATUS = {  # by the name of Temporal's WorkflowExecutionStatus
    "CANCELED": RunStatus.CANCELLED,
    "TERMINATED": RunStatus.CANCELLED,
    "FAILED": RunStatus.FAILED,
    "TIMED_OUT": RunStatus.FAILED,
}


def ended_report(error: BaseException) -> RunReport | None:
    """The report a run that did not succeed ends its execution with: the details of its
    failure (``WorkflowFailureError`` from a handle's ``result``, or the failure itself).
    None for any other failure (a run from before, one Temporal ended)."""
    cause = getattr(error, "cause", error)
    if not isinstance(cause, ApplicationError) or cause.type not in ENDED_ERRORS:
        return None
    if not cause.details:
        return None
    return RunReport.model_validate(cause.details[0])


async def _last_word(h: WorkflowHandle[Any, RunReport]) -> RunReport | None:
    """The report an ended run ended with (its result, or its failure's details); None where
    Temporal ended it (cancelled, terminated, timed out) or it failed with none."""
    try:
        return await h.result()
    except WorkflowFailureError as e:
        return ended_report(e)


def _unbegun(desc: WorkflowExecutionDescription) -> bool:
    """A running execution no worker has started a workflow task of: its history holds its
    start (and, past its delay, its first task scheduled), nothing else. A query would wait
    for a worker that has nothing to answer with."""
    return desc.status == WorkflowExecutionStatus.RUNNING and desc.history_length <= 2


async def report(client: Client, settings: Settings, run_id: str) -> RunReport:
    desc = await description(client, run_id)
    status = desc.status
    h = handle(client, run_id)
    # a team's workflow guarded by plangate.temporal: its result is its own, its report the
    # guard's (the report query, answered by its worker)
    own = desc.workflow_type == PLAN_RUN
    if _unbegun(desc):
        if not own:
            raise _team_unanswered(run_id, desc, "it has not begun: no worker has taken it")
        return await unbegun.report(client, settings, run_id, desc)
    if own and status not in (None, WorkflowExecutionStatus.RUNNING):
        last = await _last_word(h)  # read with no worker
        if last is not None:
            return last
    try:
        rep: RunReport = await h.query(
            REPORT_QUERY, result_type=RunReport, rpc_timeout=REPORT_QUERY_TIMEOUT
        )
    except WorkflowQueryFailedError as e:
        if not own:  # its worker has no report query: it runs without plangate's guard
            raise _team_unanswered(run_id, desc, "its worker answers no report query "
                                   f"({_one_line(e)})") from None
        if status != WorkflowExecutionStatus.FAILED:
            raise
        return await unbegun.report(client, settings, run_id, desc)  # its input refused
    except RPCError as e:
        if not own and e.status == RPCStatusCode.FAILED_PRECONDITION:  # no task taken
            raise _team_unanswered(run_id, desc, (
                "it has not begun: no worker has completed its first workflow task"
                if status == WorkflowExecutionStatus.RUNNING else
                "it ended before a worker began it")) from None
        if not own and e.status not in NO_ANSWER:
            raise _team_unanswered(run_id, desc, f"its report could not be read "
                                   f"({_one_line(e)})") from None
        if e.status == RPCStatusCode.FAILED_PRECONDITION or (
            status == WorkflowExecutionStatus.TERMINATED
        ):  # no workflow task (yet): it has not begun
            return await unbegun.report(client, settings, run_id, desc)
        if e.status in NO_ANSWER:
            said = status.name.lower() if status is not None else "unknown"
            raise NoWorkerAnswered(
                f"no worker answered the report query of run {run_id!r} within "
                f"{REPORT_QUERY_TIMEOUT.total_seconds():g} s (is a worker polling task "
                f"queue {desc.task_queue}?); Temporal's execution status: {said}",
                said,
            ) from None
        raise
    # a run Temporal ended answers as it stood (replayed): Temporal's status says how it ended.
    # A team's guarded workflow fails its execution when it halts or is cancelled: the status
    # its report ended with says which (Temporal's says only "failed")
    ended_as_said = not own and rep.status.final
    if status is not None and status.name in CLOSED_STATUS and not ended_as_said:
        rep.status = CLOSED_STATUS[status.name]
    return rep


def _team_unanswered(run_id: str, desc: WorkflowExecutionDescription,
                     why: str) -> NoWorkerAnswered:
    """A team's workflow gives its report only through its worker's guard (PlangatePlugin):
    none answers for it. Its input is the team's, never read as a plan's."""
    said = desc.status.name.lower() if desc.status is not None else "unknown"
    return NoWorkerAnswered(
        f"run {run_id!r}, a {desc.workflow_type} workflow of a team's, has no report to show: "
        f"{why} (a team's run is reported by its worker's PlangatePlugin, task queue "
        f"{desc.task_queue}); Temporal's execution status: {said}", said)


async def begun(client: Client, desc: WorkflowExecutionDescription) -> bool:
    """Whether the run ``desc`` describes has run a workflow task: its history says it has not
    (``_unbegun``), or the server does, at once (``FAILED_PRECONDITION``); a query no worker
    answers in time is of a run that has."""
    run_id = desc.id
    if _unbegun(desc):
        return False
    try:
        await handle(client, run_id).query(
            REPORT_QUERY, result_type=RunReport, rpc_timeout=REPORT_QUERY_TIMEOUT
        )
    except RPCError as e:
        if e.status == RPCStatusCode.FAILED_PRECONDITION:
            return False
        if e.status not in NO_ANSWER:
            raise
    return True


async def result(client: Client, settings: Settings, run_id: str) -> RunReport:
    await description(client, run_id)
    try:
        return await handle(client, run_id).result()
    except WorkflowFailureError as e:
        # halted, failed or cancelled: the report is the failure's details
        rep = ended_report(e)
        if rep is not None:
            return rep
        return await report(client, settings, run_id)
    except Exception:
        # cancelled or failed in Temporal: the report is still there to read
        return await report(client, settings, run_id)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:200] or type(e).__name__


async def end_of(client: Client, settings: Settings, run_id: str) -> str:
    """How an ended run ended, in plangate's words (its report's status, not Temporal's
    execution status): ``succeeded``, ``cancelled before it started (reason)``."""
    try:
        desc = await description(client, run_id)
        rep = await report(client, settings, run_id)
    except (RPCError, RunError) as e:  # no report to read (no worker answered)
        return f"its report cannot be read ({_one_line(e)})"
    said = rep.status.value
    if rep.status is RunStatus.CANCELLED:
        never_began = desc.status == WorkflowExecutionStatus.TERMINATED and all(
            s.attempts == 0 and s.state is StepState.CANCELLED for s in rep.steps
        )
        said = "cancelled before it started" if never_began else "cancelled"
        why = rep.cancellation.reason if rep.cancellation else ""
        if why:
            said += f" ({why})"
    return said
