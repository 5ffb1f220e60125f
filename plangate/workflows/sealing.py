"""Every activity a plangate workflow schedules carries the call seal (``records.seal``): the
deployment's HMAC over the run Temporal gave it, the activity and its arguments, made here, in
the workflow's own code, with the key the worker read at its start (``world.keys``). The key
never enters a payload or a history; only the seal does, in the call's header.

A replayer has no key and needs none (a replayed call is never sent): it seals with a stand-in.
A live workflow whose worker has no key fails its workflow task, so nothing unsealed is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.worker import (
    StartActivityInput,
    WorkflowInboundInterceptor,
    WorkflowOutboundInterceptor,
)

from plangate.records import seal

_REPLAY_KEY = b"\0" * seal.KEY_BYTES


@dataclass
class SealKey:
    """The deployment's seal key, once the worker has read it (None until then)."""

    value: bytes | None = None

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


def sealing_interceptor(key: SealKey) -> type[WorkflowInboundInterceptor]:
    """The inbound interceptor class that seals every activity the workflow starts."""

    class _Sealing(WorkflowOutboundInterceptor):
        def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
            headers = sealed_headers(key, input.activity, input.args, input.headers)
            return super().start_activity(replace(input, headers=headers))

    class SealingInbound(WorkflowInboundInterceptor):
        def init(self, outbound: WorkflowOutboundInterceptor) -> None:
            super().init(_Sealing(outbound))

    return SealingInbound
