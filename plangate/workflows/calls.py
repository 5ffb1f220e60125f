"""The activities a step calls, by name, and what their failures mean, decoded once into plain
answers (no exception leaves here for the lifecycle to steer by)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.exceptions import TimeoutError as ActivityTimeout

from plangate.plans.model import Effect
from plangate.records import options
from plangate.records.calls import ProbeReport, ProbeRequest, ToolCall, ToolFailure, ToolResult
from plangate.records.interface import PROBE_ACTIVITY
from plangate.workflows.router import Refused


@dataclass(frozen=True)
class Probed:
    report: ProbeReport


@dataclass(frozen=True)
class ProbeFailed:
    """The probes could not answer (``probe_unknown``, after the activity's retries), or their
    bound arguments do not fit them (``bad_arguments``: asking again cannot help)."""

    code: str
    detail: str
    report: ProbeReport | None = None  # what they did answer, when the activity said


ProbeAnswer = Probed | ProbeFailed


@dataclass(frozen=True)
class Called:
    result: ToolResult


@dataclass(frozen=True)
class CallFailed:
    """The tool answered with a failure (``may_have_acted`` says whether its outcome is known);
    ``refused``: what its wire status says of the world, if it refused the call."""

    failure: ToolFailure
    refused: Refused | None = None


@dataclass(frozen=True)
class CallLost:
    """No answer at all: timed out, or the worker died, after the request may have left."""

    detail: str


CallAnswer = Called | CallFailed | CallLost


async def probe(req: ProbeRequest, summary: str) -> ProbeAnswer:
    """Read the world: a local activity (a probe is short, read-only and safe to repeat; no
    server round trip to schedule it, and a worker that dies mid-read reads again on replay,
    since only a finished read is recorded). ``summary``: its one line in the Temporal UI."""
    try:
        report: ProbeReport = await workflow.execute_local_activity(
            PROBE_ACTIVITY,
            req,
            result_type=ProbeReport,
            start_to_close_timeout=options.PROBE.start_to_close_timeout,
            retry_policy=options.PROBE.retry_policy,
            summary=summary,
        )
    except (ActivityError, ApplicationError) as e:
        # a local activity's failure can arrive as its own error, not wrapped
        cause = e.cause if isinstance(e, ActivityError) else e
        if isinstance(cause, ApplicationError) and cause.details:
            answered = ProbeReport.model_validate(cause.details[0])
            detail = "; ".join(f"{r.condition.key()}: {r.detail}" for r in answered.unknown)
            known = ("bad_arguments", "system_unavailable")
            code = cause.type if cause.type in known else "probe_unknown"
            return ProbeFailed(code, detail, answered)
        return ProbeFailed("probe_unknown", str(cause or e))
    if [r.condition.key() for r in report.results] != [c.key() for c in req.conditions]:
        # An answer that is not about the conditions asked is no answer: never a pass.
        return ProbeFailed("probe_unknown", "the probe report does not answer the conditions asked")
    return Probed(report)


async def call_tool(
    tool: str, call: ToolCall, effect: Effect, summary: str, heartbeat: timedelta,
) -> CallAnswer:
    """The tool's activity; ``heartbeat``: the worker's timeout (``VersionContext``)."""
    opts = options.tool_options(effect, heartbeat)
    try:
        result: ToolResult = await workflow.execute_activity(
            tool,
            call,
            result_type=ToolResult,
            start_to_close_timeout=opts.start_to_close_timeout,
            heartbeat_timeout=opts.heartbeat_timeout,
            retry_policy=opts.retry_policy,
            cancellation_type=opts.cancellation_type,
            summary=summary,
        )
    except ActivityError as e:
        cause = e.cause
        if isinstance(cause, CancelledError):  # the run's cancel reached the call
            raise asyncio.CancelledError(str(cause)) from e
        if isinstance(cause, ApplicationError) and cause.details:
            failure = ToolFailure.model_validate(cause.details[0])
            return CallFailed(failure, Refused.of(failure.status))
        kind = "timed out" if isinstance(cause, ActivityTimeout) else "failed without an answer"
        return CallLost(f"the call {kind}")
    return Called(result)
