"""The typed inputs and outputs of the probe and tool activities."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field, JsonValue, SerializerFunctionWrapHandler, model_serializer

from plangate.plans._base import Model
from plangate.plans.model import Condition
from plangate.records.proofs import ApprovalGrant, Submission


class Outcome(StrEnum):
    HOLDS = "holds"
    VIOLATED = "violated"
    UNKNOWN = "unknown"  # the probe could not answer: never a pass


class StepRef(Model):
    """Which step of which run a call belongs to."""

    run_id: str
    plan_version: int
    n: int
    tool: str
    args: dict[str, JsonValue] = Field(default_factory=dict)


class ProbeRequest(Model):
    step: StepRef
    conditions: list[Condition]
    idempotency_key: str = ""
    # In the post phase, the fields of the tool's result its reader needs (``ToolResult.refs``).
    output: dict[str, JsonValue] | None = None
    # Conditions (by key) read only as evidence to skip: arguments that do not fit are "no
    # evidence" (violated), not a malformed step.
    lenient: list[str] = Field(default_factory=list)


class ProbeResult(Model):
    condition: Condition
    outcome: Outcome
    observed: JsonValue = None  # e.g. an ETag, a row count, a record version
    detail: str = ""
    elapsed_ms: float = 0.0
    invalid_args: bool = False  # the condition's (bound) arguments do not fit the probe
    unreachable: bool = False  # unknown because its system did not answer (world.outages)

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> Any:
        # a read of every step is in the history (and in the report): its flags only when set,
        # its time to the microsecond
        return _lean(handler(self), ("detail", "invalid_args", "unreachable"))


class ProbeReport(Model):
    results: list[ProbeResult]
    read_at: datetime
    elapsed_ms: float

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _lean(handler(self), ())

    @property
    def all_hold(self) -> bool:
        return all(r.outcome is Outcome.HOLDS for r in self.results)

    @property
    def unknown(self) -> list[ProbeResult]:
        return [r for r in self.results if r.outcome is Outcome.UNKNOWN]


class ToolCall(Model):
    step: StepRef
    idempotency_key: str
    # The authority the run acts under and the policy version it was decided under: the tool
    # re-checks both when it acts (403 when the authority is gone, 412 when the policy moved).
    on_behalf_of: str | None = None
    policy_bundle: str | None = None
    # Read in the tool's activity, the instant before it acts (the step's pre conditions): the
    # tool is not called unless every one holds (412 ``precondition_failed`` when one does
    # not, ``probe_unknown`` when one cannot answer). The check-to-use window is then this read
    # to the tool's first line, not the workflow's read plus the call's dispatch.
    check: list[Condition] = Field(default_factory=list)
    # Read in the same activity the instant after the tool returns (its post conditions, and
    # the next step's first read when it is fused): reported, never raised, since the tool
    # has acted. ``after_lenient`` as ``ProbeRequest.lenient``.
    after: list[Condition] = Field(default_factory=list)
    after_lenient: list[str] = Field(default_factory=list)
    # The workflow's word that the call waits for a person (it can only add to what the tool's
    # activity derives itself), the card a person approved with the proof of it, and the run's
    # signed submission: verified again by the activity before the tool acts.
    approval_required: bool = False
    approval: ApprovalGrant | None = None
    submission: Submission | None = None

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> Any:
        # every step's call is in the history: what protects none of them is left out
        return _lean(handler(self), ("approval_required", "approval", "submission",
                                     "on_behalf_of", "policy_bundle", "after_lenient"))


class ToolResult(Model):
    output: dict[str, JsonValue]
    started_at: datetime
    finished_at: datetime
    attempt: int = 1
    # The fields of ``output`` the tool's reader needs to re-read its record (field probes), so
    # the post check is handed those, not the whole result again.
    refs: dict[str, JsonValue] = Field(default_factory=dict)
    checked: ProbeReport | None = None  # ``ToolCall.check``, read just before the tool acted
    after: ProbeReport | None = None  # ``ToolCall.after``, read just after it returned
    # The effect ledger's word (``world.ledger``): "recorded", this call's effect has its row
    # (keyed by the call's idempotency key); "answered", the key was done already and the
    # answer is the ledger's: the tool was not called; "owed", the effect is made and its
    # outcome's row waits for Postgres (``world.owed``). "": a read, not recorded.
    ledger: str = ""
    # The effect's signed receipt (``records.receipts``), where the worker signs receipts.
    receipt: dict[str, JsonValue] | None = None

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _lean(handler(self), ("refs", "checked", "after", "ledger", "receipt"))


_EMPTY: tuple[object, ...] = (None, False, "", [], {})


def _lean(out: Any, optional: tuple[str, ...]) -> Any:
    """``out`` (a model serialized) without the ``optional`` fields that hold nothing (each of
    which defaults to that nothing, so it reads back the same), its ``elapsed_ms`` to the
    microsecond: every step's call and reads are in the history."""
    if isinstance(out, dict):
        for name in optional:
            if name in out and any(out[name] == e and type(out[name]) is type(e)
                                   for e in _EMPTY):
                del out[name]
        ms = out.get("elapsed_ms")
        if isinstance(ms, float):
            out["elapsed_ms"] = round(ms, 3)
    return out


class ToolFailure(Model):
    """What a final tool failure looked like; carried as ApplicationError details."""

    code: str
    status: int
    retryable: bool
    detail: str = ""
    data: JsonValue = None
    attempt: int = 1
    # The request may have reached the system and acted (a connection lost mid-call, an
    # unexpected error): the outcome is unknown, not a failure that left nothing behind.
    may_have_acted: bool = False
