"""The run report (DESIGN.md section 7): what a run did, step by step, as plain data."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field, JsonValue

from activities.payloads import ProbeResult


class StepState(StrEnum):
    PENDING = "PENDING"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    PROBING = "PROBING"
    EXECUTING = "EXECUTING"
    VERIFYING = "VERIFYING"
    DONE = "DONE"
    SKIPPED = "SKIPPED"
    WAITING = "WAITING"
    REPLANNING = "REPLANNING"
    HALTED = "HALTED"
    FAILED = "FAILED"  # a final failure that no recovery answers
    CANCELLED = "CANCELLED"
    VOID = "VOID"  # after a final failure: never dispatched

    @property
    def final(self) -> bool:
        return self in _FINAL


_FINAL = {
    StepState.DONE, StepState.SKIPPED, StepState.REPLANNING, StepState.HALTED,
    StepState.FAILED, StepState.CANCELLED, StepState.VOID,
}


class RunStatus(StrEnum):
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    SUCCEEDED = "succeeded"
    HALTED = "halted"
    CANCELLED = "cancelled"
    FAILED = "failed"


class Transition(BaseModel):
    state: StepState
    at: datetime


class CheckRecord(BaseModel):
    phase: str  # "skip" (post conditions read before the call), "pre", "post"
    attempt: int
    results: list[ProbeResult]
    read_at: datetime | None = None
    elapsed_ms: float = 0.0


class StepTimings(BaseModel):
    plan_made_at: datetime
    precheck_read_at: datetime | None = None
    tool_started_at: datetime | None = None
    tool_finished_at: datetime | None = None

    @property
    def check_to_use_ms(self) -> float | None:
        if self.precheck_read_at is None or self.tool_started_at is None:
            return None
        return (self.tool_started_at - self.precheck_read_at).total_seconds() * 1000

    @property
    def staleness_ms(self) -> float | None:
        if self.tool_started_at is None:
            return None
        return (self.tool_started_at - self.plan_made_at).total_seconds() * 1000


class StepReport(BaseModel):
    n: int
    tool: str
    plan_version: int
    effect: str
    state: StepState = StepState.PENDING
    attempts: int = 0  # tool activity attempts, as Temporal counted them
    answer: str | None = None  # the answer a failed check or call got
    reason: str = ""
    checks: list[CheckRecord] = Field(default_factory=list)
    timings: StepTimings
    check_to_use_ms: float | None = None
    staleness_ms: float | None = None
    result: dict[str, JsonValue] | None = None
    binds: dict[str, JsonValue] = Field(default_factory=dict)
    transitions: list[Transition] = Field(default_factory=list)


class FailureRecord(BaseModel):
    step: int
    tool: str
    plan_version: int
    code: str
    status: int | None = None
    retryable: bool
    detail: str = ""
    answer: str = ""
    # "not_established": the step's own post-check failed; "destroyed": a state an earlier step
    # verified was gone at a later pre-check (established_by names that step).
    attribution: str | None = None
    established_by: int | None = None


class CompletedStep(BaseModel):
    n: int
    tool: str
    plan_version: int
    state: StepState
    args: dict[str, JsonValue] = Field(default_factory=dict)
    binds: dict[str, JsonValue] = Field(default_factory=dict)
    result: dict[str, JsonValue] | None = None


class ReplanRecord(BaseModel):
    """One call of the re-planner, counted against the run's budget."""

    attempt: int
    after_step: int
    after_version: int
    backend: str = ""
    accepted: bool
    reason: str = ""
    problems: list[str] = Field(default_factory=list)


class Metrics(BaseModel):
    probe_ms: float = 0.0
    probes_run: int = 0
    check_to_use_ms_max: float | None = None
    staleness_ms_max: float | None = None


class RunReport(BaseModel):
    run_id: str
    status: RunStatus = RunStatus.RUNNING
    goal: str
    plan_version: int = 1
    steps: list[StepReport] = Field(default_factory=list)
    completed: list[CompletedStep] = Field(default_factory=list)
    failure: FailureRecord | None = None
    replans_used: int = 0
    replans_max: int = 2
    replans: list[ReplanRecord] = Field(default_factory=list)
    approvals: list[JsonValue] = Field(default_factory=list)
    escalation: str | None = None
    metrics: Metrics = Field(default_factory=Metrics)

    def step(self, n: int, plan_version: int | None = None) -> StepReport:
        v = self.plan_version if plan_version is None else plan_version
        for s in self.steps:
            if s.n == n and s.plan_version == v:
                return s
        raise KeyError((v, n))
