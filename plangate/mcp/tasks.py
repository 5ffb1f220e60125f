"""Guarded calls as MCP tasks (the Tasks extension, ``io.modelcontextprotocol/tasks``).

A guarded call (``plangate.mcp.guarded``) that has not ended when it settles (it waits for a
person, or is still running after the server's answer window) is answered, for a client that
declared the extension on its request, with a task whose id is the run id: the task is the
Temporal run, so it outlives this server process and ``tasks/get`` answers after a restart.

- ``working``: the run is queued or running;
- ``input_required`` while a card waits: its ``inputRequests`` hold one URL-mode elicitation
  per pending card, pointing a person at the approval page. The client's ``tasks/update`` is
  acknowledged and ignored: a response carries no approver's signature, so nothing an MCP
  client sends approves anything (the worker would refuse it at the call regardless). Only
  to a client that declared URL-mode elicitation: any other is sent no elicitation (the spec
  forbids it; the MCP Inspector CLI waited forever on one it could not answer) and sees the
  waiting run ``working``, the approve line in its ``statusMessage``;
- ``completed`` once the run has ended, its ``result`` the call's answer (``isError`` when the
  run did not succeed, as the extension asks: ``failed`` is for protocol errors only);
- ``cancelled`` when the run was cancelled; ``tasks/cancel`` cancels the run, by the same
  signal ``plangate cancel`` sends, recorded with its reason and requester.

Clients that did not declare the extension get the run id and state in an ordinary result.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    RequestParams,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from plangate.client.api import NoWorkerAnswered, Plangate, UnknownRun
from plangate.client.command import plangate_command
from plangate.errors import PlangateError
from plangate.mcp.access import Access
from plangate.mcp.clients import McpClient, NotYourRun
from plangate.mcp.guarded import (
    RUN_PREFIX,
    GuardedCall,
    call_result,
    follow,
    summary,
    who_approves,
)
from plangate.plans.catalogue import ToolInfo
from plangate.plans.model import Effect
from plangate.records.report import RunReport, RunStatus

TASKS = "io.modelcontextprotocol/tasks"
POLL_MS = 500


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId", min_length=1, max_length=300)


class UpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


# who, the call, its tool, the run id, whether the call was counted already (a read offered)
Start = Callable[[McpClient, GuardedCall, ToolInfo, str, bool], Awaitable[str]]
# a read offered to the worker: its report (None where a run must answer), and whether the
# call was counted against the client's limit
Read = Callable[[McpClient, GuardedCall, ToolInfo], Awaitable[tuple[RunReport | None, bool]]]
Caller = Callable[[ServerRequestContext[Any, Any]], McpClient]


def client_declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """A task answer only where the client can take one: the Tasks extension declared on a
    2026-era connection. On a handshake-era connection (2025-11-25 and older) the SDK
    validates a ``tools/call`` answer as a ``CallToolResult`` whatever the client declared
    (its 2025-11-25 tasks are types only), so such a client gets the pending-run answer."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    caps = ctx.session.client_capabilities
    extensions = getattr(caps, "extensions", None) if caps is not None else None
    return isinstance(extensions, Mapping) and TASKS in extensions


def client_takes_url_elicitation(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the client declared URL-mode elicitation (its ``capabilities.elicitation.url``):
    the only clients a task's input request may be sent to."""
    caps = ctx.session.client_capabilities
    elicitation = getattr(caps, "elicitation", None) if caps is not None else None
    return getattr(elicitation, "url", None) is not None


def _stamp(rep: RunReport) -> str:
    at = rep.submitted_at or rep.begun_at or datetime.now(UTC)
    return at.isoformat().replace("+00:00", "Z")


def task_status(rep: RunReport, asks: bool = True) -> str:
    if rep.status is RunStatus.CANCELLED:
        return "cancelled"
    if rep.status.final:
        return "completed"
    if rep.status is RunStatus.AWAITING_APPROVAL and asks:
        return "input_required"
    return "working"


def task(rep: RunReport, result_type: str, approval_url: str, asks: bool = True,
         approvers: Sequence[str] = ()) -> dict[str, Any]:
    """The run as a task (``resultType`` "task" when a call creates it, "complete" when
    ``tasks/get`` reads it); a card's input request only where ``asks`` (the client takes
    URL-mode elicitation). ``approvers``: the names the deployment lists, told with a card."""
    status = task_status(rep, asks)
    out: dict[str, Any] = {
        "resultType": result_type, "taskId": rep.run_id, "status": status,
        "statusMessage": summary(rep, approvers), "createdAt": _stamp(rep),
        "lastUpdatedAt": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "ttlMs": None, "pollIntervalMs": POLL_MS,
    }
    if status == "input_required":
        out["inputRequests"] = {
            f"approval-{a.plan_version}-{a.step}-{a.digest[:16]}": {
                "method": "elicitation/create",
                "params": {
                    "mode": "url", "url": approval_url,
                    "elicitationId": f"{rep.run_id}/{a.plan_version}/{a.step}/{a.digest[:16]}",
                    "message": (
                        f"Step {a.step} ({a.card.tool}, effect {a.card.effect.value}) waits for "
                        f"a credentialed approver: the approval page, or {plangate_command()} "
                        f"approve {rep.run_id} --step {a.step} --digest {a.digest}, "
                        f"{who_approves(approvers)}. An answer here approves nothing."
                    ),
                },
            }
            for a in rep.approvals if a.status.value == "pending"
        }
    if status == "completed":
        out["result"] = call_result(rep, approvers).model_dump(by_alias=True, mode="json",
                                                    exclude_none=True)
    return out


class GuardedTasks(Extension):
    """Answers ``tools/call`` of the guarded tools (as a result, or as a task) and serves
    ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` for the runs they start."""

    identifier = TASKS

    def __init__(
        self, tools: Mapping[str, ToolInfo], *, start: Start, access: Access, caller: Caller,
        answer_within_s: float, approval_url: str, read: Read | None = None,
        approvers: Sequence[str] = (),
    ) -> None:
        self.guarded = tools
        self.approvers = tuple(approvers)  # the names the deployment lists, told with a card
        self._start, self._access, self._caller = start, access, caller
        self._read = read
        self.answer_within_s = answer_within_s
        self.approval_url = approval_url

    def settings(self) -> dict[str, Any]:
        """Nothing: the extension's capability is an empty object. A client may hold it to
        that (the MCP Inspector's ext-tasks does, strictly): with any key there it takes the
        server for one without tasks, then rejects the task it is answered with."""
        return {}

    async def _follow(self, api: Plangate, run_id: str) -> RunReport:
        return await follow(api.report, api.result, run_id, self.answer_within_s)

    def methods(self) -> Sequence[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskParams, self._get),
            MethodBinding("tasks/update", UpdateParams, self._update),
            MethodBinding("tasks/cancel", TaskParams, self._cancel_task),
        ]

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        info = self.guarded.get(params.name)  # by its served name; the run names info.name
        if info is None:
            return await call_next(ctx)
        who = self._caller(ctx)
        try:
            call = GuardedCall.of(info.name, params.arguments, params.meta)
        except ValueError as e:
            raise MCPError(code=INVALID_PARAMS, message=str(e)) from None
        run_id = call.run_id(who.name)
        try:
            counted = False
            if self._read is not None and info.effect is Effect.READ:
                read, counted = await self._read(who, call, info)
                if read is not None:  # the worker answered: no run
                    return call_result(read, self.approvers)
            run_id = await self._start(who, call, info, run_id, counted)
        except (ToolError, PlangateError) as e:  # refused before a run began: nothing started
            return _error(str(e))
        # From here the run exists: every answer names it, whatever happens next.
        try:
            rep = await self._follow(await self._access.api(who), run_id)
        except Exception as e:  # started, but no worker (or nothing) says how it goes yet
            return CallToolResult(content=[TextContent(
                type="text", text=f"run {run_id} started; {_one_line(e)}; follow it with "
                f"run_report")], structured_content={"run_id": run_id, "status": "unknown"},
                is_error=isinstance(e, NoWorkerAnswered))
        if not rep.status.final and client_declares_tasks(ctx):
            return task(rep, "task", self.approval_url, client_takes_url_elicitation(ctx),
                        self.approvers)
        return call_result(rep, self.approvers)

    async def _run(self, ctx: ServerRequestContext[Any, Any], params: TaskParams
                   ) -> tuple[Plangate, RunReport]:
        """The task's run, where it is a guarded call of this very client; any other id is
        no task (another client's run is not even said to exist)."""
        who = self._caller(ctx)
        if not params.task_id.startswith(RUN_PREFIX):
            raise MCPError(code=INVALID_PARAMS, message=f"no task {params.task_id!r}")
        try:
            api = await self._access.mine(who, params.task_id)
            return api, await api.report(params.task_id)
        except (NotYourRun, UnknownRun):
            raise MCPError(code=INVALID_PARAMS, message=f"no task {params.task_id!r}") from None
        except NoWorkerAnswered as e:
            raise MCPError(code=INTERNAL_ERROR, message=str(e)) from None

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        return task((await self._run(ctx, params))[1], "complete", self.approval_url,
                    client_takes_url_elicitation(ctx), self.approvers)

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        await self._run(ctx, params)  # a known task; its responses approve nothing (see above)
        return {"resultType": "complete"}

    async def _cancel_task(self, ctx: ServerRequestContext[Any, Any], params: Any
                           ) -> HandlerResult:
        from plangate.client.api import RunEnded

        api, rep = await self._run(ctx, params)
        if not rep.status.final:
            with contextlib.suppress(RunEnded):  # it ended meanwhile: its task says how
                await api.cancel(rep.run_id, reason="tasks/cancel",
                                 requester=f"{self._caller(ctx).requester} (tasks/cancel)")
            rep = await self._follow(api, rep.run_id)
        return task(rep, "complete", self.approval_url, client_takes_url_elicitation(ctx),
                    self.approvers)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:300] or type(e).__name__


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
