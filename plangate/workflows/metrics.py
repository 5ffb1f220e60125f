"""plangate's own metrics from workflow code: the router's answers, the check-to-use and
plan-to-use windows, 409/412/403 refusals, approval cards.

They go through the workflow's metric meter (``workflow.metric_meter()``), which carries the
labels ``namespace``, ``task_queue`` and ``workflow_type`` and records nothing while the
workflow replays: a run evicted from the worker's cache and replayed, or replayed by
``tests/test_replay.py``, counts nothing twice. A metric is no command: it is not in the
history and changes nothing a run does, so recording one needs no ``workflow.patched``; and a
metric that cannot be recorded is logged, never raised into the run. Every label value is a
registered tool's name or a fixed word: never a run id, a key or a path.

On the worker's Prometheus endpoint when it serves one (``PLANGATE_METRICS_ADDRESS``,
``plangate.worker.metrics``); elsewhere nowhere.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

ANSWERS = "plangate_answers"
CHECK_TO_USE = "plangate_check_to_use"
PLAN_TO_USE = "plangate_plan_to_use"
TOOL_REFUSALS = "plangate_tool_refusals"
APPROVALS_REQUESTED = "plangate_approvals_requested"
APPROVALS_ANSWERED = "plangate_approvals_answered"
APPROVAL_WAIT = "plangate_approval_wait"


def answer(kind: str, tool: str) -> None:
    """The router's answer to a step (``workflows.router``): skip, wait, retry, replan, halt. A
    wait counts once however many reads it takes."""
    _count(ANSWERS, "answers of the router, by kind", kind=kind, tool=tool)


def windows(tool: str, check_to_use_ms: float | None, plan_to_use_ms: float | None) -> None:
    """A call's check-to-use window (the pre check's read -> the tool began, two workers'
    clocks) and plan-to-use window (the plan written -> the call dispatched)."""
    if check_to_use_ms is not None:
        _observe(CHECK_TO_USE, "pre-check read to tool start", check_to_use_ms, tool=tool)
    if plan_to_use_ms is not None:
        _observe(PLAN_TO_USE, "plan written to call dispatched", plan_to_use_ms, tool=tool)


def refusal(tool: str, status: int) -> None:
    """A call the tool refused (``router.Refused``), labelled with the status it sent: 409
    (conflict), 412 (superseded) or 403 (authority revoked, out of scope)."""
    _count(TOOL_REFUSALS, "tool calls refused: 409, 412, 403", tool=tool, status=str(status))


def approval_requested(tool: str) -> None:
    _count(APPROVALS_REQUESTED, "approval cards published", tool=tool)


def approval_answered(tool: str, result: str, waited_ms: float) -> None:
    """A card's end: ``approved``, ``rejected``, ``expired`` or ``cancelled`` (the run was
    cancelled while it waited)."""
    _count(APPROVALS_ANSWERED, "approval cards answered", tool=tool, result=result)
    _observe(APPROVAL_WAIT, "approval card published to answered", waited_ms, result=result)


def _count(name: str, description: str, **labels: str) -> None:
    try:
        workflow.metric_meter().create_counter(name, description).add(1, labels)
    except Exception:
        workflow.logger.warning("metric %s not recorded", name, exc_info=True)


def _observe(name: str, description: str, ms: float, **labels: str) -> None:
    # two workers' clocks may disagree by a little: a window below zero is recorded as zero
    value = timedelta(milliseconds=max(ms, 0.0))
    try:
        meter = workflow.metric_meter()
        meter.create_histogram_timedelta(name, description, "ms").record(value, labels)
    except Exception:
        workflow.logger.warning("metric %s not recorded", name, exc_info=True)
