"""The door at the call: every activity plangate's worker registers decides who called it from
what the Temporal server says (``activity.info()``) and from the call seal, never from its
arguments, ids or headers taken on their word. A call it cannot place is refused before anything
is read or written: 403 ``not_permitted``, non-retryable, naming why.

Who may call what, and what is verified:

- ``plangate.read_call``: anyone, standalone only (``plangate mcp``'s read): no workflow; the
  rest it derives itself (``activities.reading``).
- ``guard.*``, ``probe.evaluate``, ``replanner.*``, ``windows.record``, ``index.record``,
  ``grant.cover``:
  plangate's own workflows: a local activity, so run by this worker for a workflow task it
  took.
- every tool: a plangate run of this deployment: a workflow's call, sealed
  (``records.seal``) for this namespace, workflow, run, tool and arguments.

Local activities are run only by the worker that runs the workflow's task: a stranger's workflow
never runs one here. A regular activity can be scheduled by anyone; the seal, made by
plangate's workflow code with the deployment's key (``workflows.sealing``), says it was ours.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from plangate.activities.call_checks import as_application_error
from plangate.records import seal
from plangate.records.interface import READ_CALL_ACTIVITY, WORKER_ACTIVITIES
from plangate.workflows.sealing import SealKey, sealing_interceptor
from plangate.world.errors import ToolError

log = logging.getLogger(__name__)
KEY_RETRY_S = 2.0

LOCAL_ONLY = frozenset(WORKER_ACTIVITIES)
STANDALONE_ONLY = frozenset({READ_CALL_ACTIVITY})


def seal_refusal(key: bytes | None, info: activity.Info, headers: dict[str, Payload] | Any,
                 args: Any, vouched: bytes = b"") -> str | None:
    """Why the call's seal does not place it in a plangate run of this deployment, or None."""
    given = headers.get(seal.HEADER)
    if given is None:
        return ("it carries no seal of this deployment: only a plangate run of this deployment "
                "schedules it")
    if (key is None or info.workflow_run_id is None or info.workflow_id is None
            ):
        return "this worker holds no seal key to verify it with"
    datas = [p.data for p in activity.payload_converter().to_payloads(list(args))]
    ok = seal.verifies(key, given.data, namespace=info.namespace,
                       workflow_id=info.workflow_id, run_id=info.workflow_run_id,
                       activity=info.activity_type, args=seal.args_digest(datas),
                       header=vouched)
    if not ok:
        return ("its seal does not verify for this run, activity and arguments: it was not "
                "scheduled by a plangate run of this deployment (a seal copied from another "
                "run, or arguments changed)")
    return None


def refusal(info: activity.Info, key: bytes | None, input: ExecuteActivityInput) -> str | None:
    """Why this worker does not act on this call, or None."""
    name = info.activity_type
    if name in STANDALONE_ONLY:
        if info.workflow_id is not None:
            return (f"{name} runs only standalone (plangate mcp's reads); this call was "
                    f"scheduled by workflow {info.workflow_id!r}")
        return None
    if info.workflow_id is None:
        return ("started outside a workflow (a standalone activity): plangate acts only for a "
                "call one of its runs scheduled")
    if name in LOCAL_ONLY:
        if not info.is_local:
            return (f"plangate runs {name} only as a local activity of its own workflows; "
                    f"workflow {info.workflow_id!r} scheduled it as a regular activity")
        return None
    if info.is_local:
        return f"plangate never runs {name} as a local activity"
    return seal_refusal(key, info, input.headers, input.args)


async def ensure(key: SealKey) -> bytes | None:
    """The key, read now where it is not yet (None where it cannot be read: a worker that
    starts while Postgres is down starts without it and schedules no tool call until it has
    it, its workflow tasks failing and tried again)."""
    if key.value is None and key.source is not None:
        try:
            key.value = await key.source()
        except Exception as e:  # Postgres down: the caller says what waits for it
            log.warning("the call seal's key cannot be read yet: %s", e)
    return key.value


async def keep_trying(key: SealKey) -> None:
    """Read the key until it is read (a task of the worker's while it runs)."""
    while True:
        if await ensure(key) is not None:
            return
        await asyncio.sleep(KEY_RETRY_S)


class DoorAtCall(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, key: SealKey) -> None:
        super().__init__(next)
        self.key = key

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        key = self.key.value
        if key is None and seal.HEADER in input.headers:
            key = await ensure(self.key)
            if key is None:  # nothing acts without Postgres anyway: asked again later
                raise as_application_error(ToolError(
                    "system_unavailable", f"{info.activity_type}: not called: the call's seal "
                    "cannot be verified until the deployment's key can be read (Postgres)"))
        why = refusal(info, key, input)
        if why is not None:
            log.warning("refused %s (workflow %s, activity %s): %s", info.activity_type,
                        info.workflow_id, info.activity_id, why)
            raise as_application_error(ToolError(
                "not_permitted", f"{info.activity_type}: not called: {why}"))
        return await super().execute_activity(input)


class Door(Interceptor):
    """The door on plangate's worker: its workflows seal what they schedule, its activities
    verify who called them."""

    def __init__(self, key: SealKey) -> None:
        self.key = key
        self._workflow = sealing_interceptor(key)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return DoorAtCall(next, self.key)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return self._workflow
