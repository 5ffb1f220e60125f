"""A stranger on the namespace (issue 46): a Temporal client with the deployment's data
converter and no plangate key of any kind. What it captures from real histories (each
activity's arguments and headers as the server recorded them, the run's input, the local
activities' markers) and how it replays them: as a standalone activity (``standalone``), or
from a workflow of its own (``AttackWorkflow``) on its own worker and queue, scheduling onto
the victim's queue, every header it captured sent again. Every call is one attempt with a
short limit, so a refusal, or an answer, is seen in seconds (``Outcome``)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import ActivityFailureError, Client
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.client import OutboundInterceptor as ClientOutbound
from temporalio.client import StartActivityInput as ClientStartActivity
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    StartActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

# one attempt, answered (or timed out) well within a test's patience
LIMIT = timedelta(seconds=15)
ONCE = RetryPolicy(maximum_attempts=1)


@dataclass(frozen=True)
class Captured:
    """One activity a victim's run scheduled, as its history holds it."""

    name: str
    args: list[Any]  # decoded with the deployment's converter: plain JSON
    headers: dict[str, Payload]
    task_queue: str


@dataclass(frozen=True)
class History:
    """What a victim's finished run left for anyone who can read the namespace."""

    workflow_id: str
    input: list[Any]  # the run's start input, decoded
    calls: list[Captured]
    local: list[str] = field(default_factory=list)  # local activities run, by marker

    def call(self, name: str) -> Captured:
        found = [c for c in self.calls if c.name == name]
        assert found, f"{self.workflow_id} scheduled no {name}: {[c.name for c in self.calls]}"
        return found[0]


async def captured(client: Client, workflow_id: str) -> History:
    """The latest execution of ``workflow_id``'s history, decoded with ``client``'s converter."""
    events = [e async for e in client.get_workflow_handle(workflow_id).fetch_history_events()]
    start = events[0].workflow_execution_started_event_attributes
    conv = client.data_converter
    run_input = await conv.decode(start.input.payloads) if start.input.payloads else []
    calls: list[Captured] = []
    local: list[str] = []
    for e in events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            a = e.activity_task_scheduled_event_attributes
            args = await conv.decode(a.input.payloads) if a.input.payloads else []
            calls.append(Captured(a.activity_type.name, list(args), dict(a.header.fields),
                                  a.task_queue.name))
        elif (e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
              and e.marker_recorded_event_attributes.marker_name == "core_local_activity"):
            data = e.marker_recorded_event_attributes.details["data"].payloads[0].data
            local.append(json.loads(data)["activity_type"])
    return History(workflow_id, list(run_input), calls, local)


@dataclass(frozen=True)
class Outcome:
    """How a call ended: answered (``type`` None, its ``result``) or failed with an error."""

    name: str
    type: str | None = None
    message: str = ""
    non_retryable: bool = False
    result: Any = None

    def refused(self, because: str) -> bool:
        """Refused as the door refuses: ``not_permitted``, for good, naming ``because``."""
        return (self.type == "not_permitted" and self.non_retryable
                and because in self.message)

    def said(self) -> str:
        if self.type is None:
            return f"{self.name}: ANSWERED {str(self.result)[:160]}"
        return f"{self.name}: {self.type} (non_retryable={self.non_retryable}) {self.message[:200]}"


def outcome_of(name: str, e: BaseException) -> Outcome:
    if isinstance(e, ApplicationError):
        return Outcome(name, e.type or "", e.message, e.non_retryable)
    return Outcome(name, type(e).__name__, str(e), False)


class _Adding(ClientOutbound):
    def __init__(self, next: ClientOutbound, headers: Mapping[str, Payload]) -> None:
        super().__init__(next)
        self.headers = headers

    async def start_activity(self, input: ClientStartActivity) -> Any:
        input.headers = {**input.headers, **self.headers}
        return await super().start_activity(input)


class _HeadersOnStart(ClientInterceptor):
    def __init__(self, headers: Mapping[str, Payload]) -> None:
        self.headers = headers

    def intercept_client(self, next: ClientOutbound) -> ClientOutbound:
        return _Adding(next, self.headers)


def with_headers(client: Client, headers: Mapping[str, Payload]) -> Client:
    """``client``'s connection and converter, sending ``headers`` on every activity it starts."""
    config = client.config(active_config=True)
    config["plugins"] = []
    config["interceptors"] = [*config["interceptors"], _HeadersOnStart(headers)]
    return Client(**config)


async def standalone(client: Client, name: str, args: Sequence[Any], *, queue: str,
                     activity_id: str, headers: Mapping[str, Payload] | None = None) -> Outcome:
    """``name`` started with no workflow, under ``activity_id``, on ``queue``."""
    c = with_headers(client, headers) if headers else client
    try:
        result = await c.execute_activity(
            name, args=list(args), id=activity_id, task_queue=queue,
            schedule_to_close_timeout=LIMIT, retry_policy=ONCE)
    except ActivityFailureError as e:
        return outcome_of(name, e.cause)
    return Outcome(name, result=result)


def b64(p: Payload) -> str:
    return base64.b64encode(p.SerializeToString()).decode()


def payload(text: str) -> Payload:
    p = Payload()
    p.ParseFromString(base64.b64decode(text))
    return p


def shot(name: str, args: Sequence[Any], queue: str,
         headers: Mapping[str, Payload] | None = None) -> dict[str, Any]:
    """One activity an ``AttackWorkflow`` schedules (``headers`` sent with it)."""
    return {"name": name, "args": list(args), "queue": queue,
            "headers": {k: b64(v) for k, v in (headers or {}).items()}}


@workflow.defn(name="DoorAttack", sandboxed=False)  # an attacker's code: no sandbox needed
class AttackWorkflow:
    """Schedules each shot as a regular activity on the shot's queue, one attempt each, and
    says how each ended."""

    @workflow.run
    async def run(self, shots: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for s in shots:
            try:
                result = await workflow.execute_activity(
                    s["name"], args=s["args"], task_queue=s["queue"],
                    schedule_to_close_timeout=LIMIT, retry_policy=ONCE)
            except ActivityError as e:
                o = outcome_of(s["name"], e.cause or e)
                out.append({"name": o.name, "type": o.type, "message": o.message,
                            "non_retryable": o.non_retryable})
                continue
            out.append({"name": s["name"], "result": result})
        return out


class _Sending(WorkflowOutboundInterceptor):
    def __init__(self, next: WorkflowOutboundInterceptor) -> None:
        super().__init__(next)
        self.headers: list[dict[str, str]] = []

    def start_activity(self, input: StartActivityInput) -> Any:
        mine = self.headers.pop(0) if self.headers else {}
        input.headers = {**input.headers, **{k: payload(v) for k, v in mine.items()}}
        return super().start_activity(input)


class _Inbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        self.sending = _Sending(outbound)
        super().init(self.sending)

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        shots = input.args[0] if input.args else []
        self.sending.headers = [dict(s.get("headers") or {}) for s in shots]
        return await super().execute_workflow(input)


class CopiedHeaders(Interceptor):
    """The attacker's worker: every activity its workflow schedules carries the headers its
    shot captured from a victim's history."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        return _Inbound


async def from_workflow(client: Client, attacker_queue: str, workflow_id: str,
                        shots: list[dict[str, Any]]) -> list[Outcome]:
    """The shots from an ``AttackWorkflow`` started under ``workflow_id`` (a finished victim's:
    Temporal allows the id again) on the attacker's own queue, whose worker must be running."""
    said = await client.execute_workflow(
        AttackWorkflow.run, shots, id=workflow_id, task_queue=attacker_queue,
        execution_timeout=timedelta(seconds=90))
    return [Outcome(s["name"], s.get("type"), s.get("message", ""),
                    bool(s.get("non_retryable")), s.get("result")) for s in said]


@workflow.defn(name="DoorContinue", sandboxed=False)
class ContinueWorkflow:
    """Continues as new into another workflow type on another queue, with the input it is
    given: Temporal then says the next run continued from this one."""

    @workflow.run
    async def run(self, into: str, queue: str, input: dict[str, Any]) -> None:
        workflow.continue_as_new(input, workflow=into, task_queue=queue)  # type: ignore[arg-type]
