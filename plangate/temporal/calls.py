"""What the guard of a team's activity hands between its parts, as plain data: the workflow
interceptor and its local activities (``CheckRequest`` -> ``GuardCheck``, ``ReadRequest`` ->
``ProbeReport``), and the header a guarded call carries to the activity interceptor
(``GuardHeader``).

The team's data converter carries them: each is sent as a JSON string (a payload every converter
takes) and the header as a ``json/plain`` payload of its own, so nothing here depends on the
converter the team chose, nor changes it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import Field, JsonValue
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadConverter

from plangate.plans._base import Model
from plangate.plans.guards import PolicyMark
from plangate.plans.model import Condition, Effect
from plangate.records.calls import ProbeReport, StepRef
from plangate.records.proofs import ApprovalGrant

HEADER = "plangate-guard"
GUARD_VERSION = 1  # the plan version every guarded call of a team's workflow is of


class CheckRequest(Model):
    workflow_id: str
    activity: str
    n: int  # the call's number among the guarded calls of this workflow
    values: list[JsonValue]  # its arguments as the team's converter sends them
    key: str
    again: bool = False  # the read after a person's approval (its decisions are not kept twice)


class GuardCheck(Model):
    """The guards of one call, derived on the worker from its table, settings and policies,
    and what its pre conditions read."""

    effect: Effect
    args: dict[str, JsonValue] = Field(default_factory=dict)  # by name, as the checks bind
    refusal: str | None = None
    refusal_code: str = ""
    approval: bool = False  # the call waits for a person's approval
    pre: list[Condition] = Field(default_factory=list)
    post: list[Condition] = Field(default_factory=list)
    read: ProbeReport | None = None  # ``pre``, read
    policy: PolicyMark | None = None
    policy_bundle: str | None = None
    on_behalf_of: str | None = None
    approvers: dict[str, str] = Field(default_factory=dict)  # name -> public key, base64
    approval_ttl_s: float = 24 * 3600.0
    halts: bool = False  # the table says a failed check fails the workflow
    visible: bool = False  # plangate's search attributes are registered: the run is listed


class ReadRequest(Model):
    step: StepRef
    conditions: list[Condition]
    key: str


class GuardHeader(Model):
    """What a guarded call carries to its activity: which call it is and the approval it was
    given. Nothing in it is taken on its word: the activity re-derives the guards and verifies
    the grant against this very call."""

    n: int
    key: str
    # the workflow decided the call's guards first (``plangate.guard.check``, for a card) under
    # this policy bundle, which must still be in force; else the activity decides them itself
    decided: bool = False
    policy_bundle: str | None = None
    grant: ApprovalGrant | None = None
    # the workflow interceptor reads the guard's answer (``GuardAnswer``) off the result
    wrap: bool = False


class GuardAnswer(Model):
    """What the guard at the call read and decided, carried back on the activity's result
    payload (its metadata ``ANSWER_META``; the payload itself is the team's answer, as their
    converter made it): the workflow judges the post conditions from it, as a plan step judges
    its call's read after."""

    effect: Effect
    halts: bool = False
    args: dict[str, JsonValue] = Field(default_factory=dict)
    checked: ProbeReport | None = None  # the pre conditions, read the instant before it acted
    post: list[Condition] = Field(default_factory=list)
    after: ProbeReport | None = None  # ``post``, read the instant after (None: not read)
    ledger: str = ""  # "recorded", or "answered": the key was done, the activity not called
    visible: bool = False


ANSWER_META = "plangate-guard"


def header_payload(header: GuardHeader) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=header.model_dump_json().encode())


def header_of(payload: Payload) -> GuardHeader:
    return GuardHeader.model_validate_json(payload.data)


def wire_json(converter: PayloadConverter, values: Sequence[Any]) -> list[JsonValue]:
    """``values`` as the team's converter sends them, read as JSON: what the guard binds and
    a card shows is what the activity receives. A payload that is not JSON is named by its
    encoding (a check that needs it cannot be bound)."""
    out: list[JsonValue] = []
    for p in converter.to_payloads(values):
        encoding = p.metadata.get("encoding", b"").decode()
        if encoding == "json/plain":
            out.append(json.loads(p.data))
        elif encoding == "binary/null":
            out.append(None)
        else:
            out.append({"$payload": encoding})
    return out
