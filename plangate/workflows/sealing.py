"""Every activity a plangate workflow schedules carries the call seal (``records.seal``): the
deployment's HMAC over the run Temporal gave it, the activity and its arguments, made here, in
the workflow's own code, with the key the worker read at its start (``world.keys``). The key
never enters a payload or a history; only the seal does, in the call's header.

A replayer has no key and needs none (a replayed call is never sent): it seals with a stand-in.
A live workflow whose worker has no key fails its workflow task, so nothing unsealed is sent.

A child workflow plangate starts is sealed the same way, for its parent's run and its own id
(``child_refusal``): the re-plan child (``Replan``) runs only for a plangate run that started
it, never for a stranger who starts it (a model's time is the deployment's).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ExecuteWorkflowInput,
    StartActivityInput,
    StartChildWorkflowInput,
    WorkflowInboundInterceptor,
    WorkflowOutboundInterceptor,
)

from plangate.records import seal
from plangate.records.interface import REPLAN_WORKFLOW

_REPLAY_KEY = b"\0" * seal.KEY_BYTES


@dataclass
class SealKey:
    """The deployment's seal key, once the worker has read it (None until then). ``source``
    reads it (from the deployment's Postgres: ``worker.door.ensure`` asks it)."""

    value: bytes | None = None
    source: Callable[[], Awaitable[bytes]] | None = field(default=None, compare=False)

    def __repr__(self) -> str:  # never the key
        return f"SealKey({'loaded' if self.value else 'unset'})"


def sealed_headers(key: SealKey, activity: str, args: Any, headers: Mapping[str, Payload],
                   vouched: bytes = b"") -> dict[str, Payload]:
    """``headers`` with the seal of this call added. ``vouched``: another header's data the
    seal covers (the team plugin's guard header)."""
    value = key.value
    if value is None:
        if not workflow.unsafe.is_replaying():
            raise RuntimeError("plangate's seal key is not loaded on this worker: no call is "
                               "sent unsealed")
        value = _REPLAY_KEY
    info = workflow.info()
    datas = [p.data for p in workflow.payload_converter().to_payloads(list(args))]
    mac = seal.seal(value, namespace=info.namespace, workflow_id=info.workflow_id,
                    run_id=info.run_id, activity=activity, args=seal.args_digest(datas),
                    header=vouched)
    return {**headers, seal.HEADER: Payload(metadata={"encoding": b"binary/plain"}, data=mac)}


def _child(workflow_type: str, child_id: str) -> str:
    return f"child:{workflow_type}:{child_id}"


# only the children a plangate run starts, and only runs from this marker on (a child started
# before the seal carries none; its history replays as it ran)
CHILD_SEAL_PATCH = "plangate-child-seal"
SEALED_CHILDREN = frozenset({REPLAN_WORKFLOW})


def child_refusal(key: SealKey, headers: Mapping[str, Payload], args: Any) -> str | None:
    """Why this child workflow was not started by a plangate run of this deployment, or None
    (a replayer, holding no key, judges nothing: the history is what ran)."""
    info = workflow.info()
    if key.value is None:
        return None if workflow.unsafe.is_replaying() else "no seal key on this worker"
    parent = info.parent
    if parent is None:
        return "started by no workflow: it runs only as the child of a plangate run"
    given = headers.get(seal.HEADER)
    if given is None:
        return (f"its parent {parent.workflow_id!r} is not a plangate run of this deployment "
                "(no seal)")
    datas = [p.data for p in workflow.payload_converter().to_payloads(list(args))]
    if not seal.verifies(key.value, given.data, namespace=parent.namespace,
                         workflow_id=parent.workflow_id, run_id=parent.run_id,
                         activity=_child(info.workflow_type, info.workflow_id),
                         args=seal.args_digest(datas)):
        return (f"its seal does not verify for parent {parent.workflow_id!r}, this child and "
                "its input")
    return None


def sealing_interceptor(key: SealKey) -> type[WorkflowInboundInterceptor]:
    """The inbound interceptor class that seals every activity and child workflow the workflow
    starts, and refuses a sealed kind of child (``SEALED_CHILDREN``) a plangate run did not."""

    class _Sealing(WorkflowOutboundInterceptor):
        def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
            headers = sealed_headers(key, input.activity, input.args, input.headers)
            return super().start_activity(replace(input, headers=headers))

        async def start_child_workflow(
            self, input: StartChildWorkflowInput
        ) -> workflow.ChildWorkflowHandle[Any, Any]:
            headers = sealed_headers(key, _child(input.workflow, input.id), input.args,
                                     input.headers)
            return await super().start_child_workflow(replace(input, headers=headers))

    class SealingInbound(WorkflowInboundInterceptor):
        def init(self, outbound: WorkflowOutboundInterceptor) -> None:
            super().init(_Sealing(outbound))

        async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
            if (workflow.info().workflow_type in SEALED_CHILDREN
                    and workflow.patched(CHILD_SEAL_PATCH)):
                why = child_refusal(key, input.headers, input.args)
                if why is not None:
                    raise ApplicationError(
                        f"{workflow.info().workflow_type}: not run: {why}",
                        type="not_permitted", non_retryable=True)
            return await super().execute_workflow(input)

    return SealingInbound
