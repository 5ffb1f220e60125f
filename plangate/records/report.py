"""The run report (DESIGN.md section 7): what a run did, step by step, as plain data."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from pydantic import Field, JsonValue, PrivateAttr

from plangate.plans._base import Model
from plangate.plans.guards import PolicyMark
from plangate.plans.model import Effect
from plangate.records.approvals import ApprovalRecord, RefusedAnswer
from plangate.records.calls import ProbeResult


class StepState(StrEnum):
    PENDING = "PENDING"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    PROBING = "PROBING"
    EXECUTING = "EXECUTING"
    VERIFYING = "VERIFYING"
    DONE = "DONE"
    SKIPPED = "SKIPPED"
    WAITING = "WAITING"
    REPLANNING = "REPLANNING"  # its failure is with the re-planner
    REPLANNED = "REPLANNED"  # a re-plan was accepted: the run went on in the next version
    HALTED = "HALTED"
    FAILED = "FAILED"  # a final failure that no recovery answers
    CANCELLED = "CANCELLED"
    VOID = "VOID"  # after a final failure: never dispatched

    @property
    def final(self) -> bool:
        return self in _FINAL


_FINAL = {
    StepState.DONE, StepState.SKIPPED, StepState.REPLANNING, StepState.REPLANNED,
    StepState.HALTED,
    StepState.FAILED, StepState.CANCELLED, StepState.VOID,
}


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    SUCCEEDED = "succeeded"
    HALTED = "halted"
    CANCELLED = "cancelled"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        return self in (RunStatus.SUCCEEDED, RunStatus.HALTED, RunStatus.CANCELLED,
                        RunStatus.FAILED)


class Answer(StrEnum):
    """What a failed check or call gets (DESIGN.md section 4)."""

    SKIP = "skip"
    WAIT = "wait"
    REPLAN = "replan"
    RETRY = "retry"
    HALT = "halt"


class Phase(StrEnum):
    """When a step's conditions were read."""

    SKIP_PRE = "skip+pre"  # before the call: post conditions and evidence (to skip), then pre
    PRE = "pre"
    POST = "post"  # after the call: did it establish its state?
    READ_BACK = "read-back"  # an unknown money/external outcome, read by idempotency key
    RE_PROBE = "re-probe"  # after an approval, immediately before the call
    AT_CALL = "at-call"  # the pre conditions again, in the tool's activity, the instant before
    RE_EVALUATE = "re-evaluate"  # after a 412: what moved under the plan
    AFTER_CANCEL = "after-cancel"  # a call in flight when the run was cancelled: did it act?


class CancelOutcome(StrEnum):
    """What a call in flight when its run was cancelled really did, as its probes read it."""

    DONE = "done"
    NOT_DONE = "not_done"
    UNKNOWN = "unknown"


class Attribution(StrEnum):
    NOT_ESTABLISHED = "not_established"  # the step's own post check failed
    DESTROYED = "destroyed"  # a state an earlier step verified was gone at a later pre check


class Transition(Model):
    state: StepState
    at: datetime
    # a wait's repeated reads enter the same states again and again: counted, not listed
    times: int = 1
    last_at: datetime | None = None


class CheckRecord(Model):
    phase: Phase
    attempt: int
    results: list[ProbeResult]
    read_at: datetime | None = None
    elapsed_ms: float = 0.0
    # the reads this record stands for: a wait's later reads are folded into one record, which
    # shows the latest of them
    reads: int = 1


class StepTimings(Model):
    plan_made_at: datetime
    # the pre check's read the call acted on (the worker's clock): in the tool's activity, the
    # instant before it (``reads-in-call``), else the workflow's last read before the call
    precheck_read_at: datetime | None = None
    dispatched_at: datetime | None = None  # the call dispatched (the workflow's clock)
    tool_started_at: datetime | None = None  # the tool began (the worker's clock)
    tool_finished_at: datetime | None = None

    @property
    def check_to_use_ms(self) -> float | None:
        if self.precheck_read_at is None or self.tool_started_at is None:
            return None
        return (self.tool_started_at - self.precheck_read_at).total_seconds() * 1000

    @property
    def staleness_ms(self) -> float | None:
        """Plan written -> call dispatched: hours and days, on the workflow's clock (the
        server's, which time-skipping tests move too)."""
        if self.dispatched_at is None:
            return None
        return (self.dispatched_at - self.plan_made_at).total_seconds() * 1000


PREVIEW_BYTES = 16 * 1024  # of one tool result, in the report and the replan request
RESULTS_BUDGET = 128 * 1024  # of results kept whole or previewed, across one run's report
RECEIPTS_BUDGET = 64 * 1024  # of receipts kept in one run's report (all are in Postgres)


class ResultDigest(Model):
    """A tool result by size and SHA-256 (of its canonical JSON), and a preview of its text when
    it was too large to keep whole."""

    size: int
    sha256: str
    preview: str | None = None


@dataclass(frozen=True)
class Summary:
    value: dict[str, JsonValue] | None
    digest: ResultDigest
    kept: int  # bytes of the value or preview kept in the report


def summarize(output: dict[str, JsonValue], room: bool) -> Summary:
    text = json.dumps(output, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data = text.encode()
    digest = ResultDigest(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    if not room:
        return Summary(None, digest, 0)
    if len(data) <= PREVIEW_BYTES:
        return Summary(output, digest, len(data))
    preview = data[:PREVIEW_BYTES].decode(errors="ignore")
    return Summary(None, digest.model_copy(update={"preview": preview}), PREVIEW_BYTES)


class Refusal(Model):
    """A call the target system refused: 409 (the resource moved), 412 (a version or the
    policy superseded), 403 (authority revoked). Counted: the staleness rate (seed 002)."""

    status: int
    code: str


class CallMark(Model):
    """One answer a step's tool call got (its activity's, over its attempts): when (the tool's
    start where it ran, else when the answer came), its status (200: it ran; the refusal's or
    failure's status; 0: no answer, the call lost) and code, and how many attempts it took.
    Every call counts in the staleness report, the refused and failed ones with their answer."""

    at: datetime
    status: int
    code: str = ""
    attempts: int = 1


class LedgerLink(Model):
    """The effect ledger's row of a step's call (``plangate ledger RUN``): its idempotency key,
    and whether the answer came from the ledger (the key was done already; not called);
    ``owed``: the call's outcome was not written when it returned (Postgres away), the worker
    writes it when Postgres answers (until then the row reads ``intent``); ``receipt``: the
    effect's signed receipt, where the worker signs them."""

    key: str
    answered: bool = False
    owed: bool = False
    # the effect's signed receipt (``records.receipts``), while the run's report has room for
    # it (``RECEIPTS_BUDGET``); ``plangate receipt RUN`` exports every one
    receipt: dict[str, JsonValue] | None = None


class GrantMark(Model):
    """The standing grant a step's call was covered by (``records.grants``), a use of it
    reserved for the call's key."""

    id: str
    approver: str


class StepReport(Model):
    n: int
    tool: str
    plan_version: int
    effect: Effect
    state: StepState = StepState.PENDING
    attempts: int = 0  # tool activity attempts, as Temporal counted them
    answer: Answer | None = None  # the answer a failed check or call got
    reason: str = ""
    checks: list[CheckRecord] = Field(default_factory=list)
    timings: StepTimings
    check_to_use_ms: float | None = None
    staleness_ms: float | None = None
    result: dict[str, JsonValue] | None = None  # whole, when small (see result_digest)
    result_digest: ResultDigest | None = None
    binds: dict[str, JsonValue] = Field(default_factory=dict)
    cancel_outcome: CancelOutcome | None = None  # the call was in flight when the run stopped
    refusals: list[Refusal] = Field(default_factory=list)
    calls: list[CallMark] = Field(default_factory=list)  # every answer its tool call got
    transitions: list[Transition] = Field(default_factory=list)
    ledger: LedgerLink | None = None  # a write, external or money call's row in the ledger
    policy: PolicyMark | None = None  # what the deployment's Cedar policies decided of it
    grant: GrantMark | None = None  # the standing grant that covered its call (no card)


class FailureRecord(Model):
    step: int
    tool: str
    plan_version: int
    code: str
    status: int | None = None
    retryable: bool
    detail: str = ""
    answer: Answer | None = None
    attribution: Attribution | None = None
    established_by: int | None = None  # with DESTROYED: the step that had verified the state


class CompletedStep(Model):
    """A step done or skipped. In the run report its result is left out (the step's report has
    it); the replan request carries it, bounded, with its digest."""

    n: int
    tool: str
    plan_version: int
    state: StepState
    effect: Effect  # the effect it ran as (its tool's, or a stronger declared one)
    args: dict[str, JsonValue] = Field(default_factory=dict)
    binds: dict[str, JsonValue] = Field(default_factory=dict)
    result: dict[str, JsonValue] | None = None
    result_digest: ResultDigest | None = None


class ReplanRecord(Model):
    """One call of the re-planner, counted against the run's budget."""

    attempt: int
    after_step: int
    after_version: int
    backend: str = ""
    accepted: bool
    reason: str = ""
    problems: list[str] = Field(default_factory=list)


class Window(Model):
    """A measured window's p50, p95 and max (ms), over ``count`` samples (nearest rank)."""

    count: int = 0
    p50: float | None = None
    p95: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, samples: list[float]) -> Window:
        if not samples:
            return cls()
        ordered = sorted(samples)

        def rank(q: float) -> float:
            return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

        return cls(count=len(ordered), p50=rank(0.5), p95=rank(0.95), max=ordered[-1])


class Metrics(Model):
    probe_ms: float = 0.0
    probes_run: int = 0
    result_bytes: int = 0  # of tool results kept in this report (RESULTS_BUDGET)
    receipt_bytes: int = 0  # of receipts kept in this report (RECEIPTS_BUDGET)
    check_to_use_ms: Window = Field(default_factory=Window)  # pre-check read -> tool start
    plan_to_use_ms: Window = Field(default_factory=Window)  # plan written -> tool start
    approval_wait_ms: Window = Field(default_factory=Window)  # card issued -> answered
    answers_409: int = 0  # resource moved
    answers_412: int = 0  # precondition or policy superseded
    answers_403: int = 0  # authority revoked


class Cancellation(Model):
    reason: str = ""
    requester: str = ""
    at: datetime


class RunReport(Model):
    run_id: str
    status: RunStatus = RunStatus.RUNNING
    starts_at: datetime | None = None  # a queued run: when it will begin
    submitted_at: datetime | None = None  # the run was started (submitted)
    begun_at: datetime | None = None  # its first workflow task: after a queued run's delay
    goal: str
    plan_version: int = 1
    steps: list[StepReport] = Field(default_factory=list)
    completed: list[CompletedStep] = Field(default_factory=list)
    failure: FailureRecord | None = None
    replans_used: int = 0
    replans_max: int = 2
    replans: list[ReplanRecord] = Field(default_factory=list)
    approvals: list[ApprovalRecord] = Field(default_factory=list)
    refused_answers: list[RefusedAnswer] = Field(default_factory=list)
    escalation: str | None = None
    cancellation: Cancellation | None = None
    metrics: Metrics = Field(default_factory=Metrics)
    segments: int = 1  # runs of the chain: one more each time the run continued as new
    # the samples behind the metrics' windows: kept by the workflow, not sent with the report
    _samples: dict[str, list[float]] = PrivateAttr(default_factory=dict)

    def sample(self, window: str, ms: float) -> None:
        samples = self._samples.setdefault(window, [])
        samples.append(ms)
        setattr(self.metrics, window, Window.of(samples))

    def samples(self) -> dict[str, list[float]]:
        return {k: list(v) for k, v in self._samples.items()}

    def restore_samples(self, samples: dict[str, list[float]]) -> None:
        """The samples of an earlier run of the chain (continue-as-new carries them)."""
        self._samples = {k: list(v) for k, v in samples.items()}

    def step(self, n: int, plan_version: int | None = None) -> StepReport:
        v = self.plan_version if plan_version is None else plan_version
        for s in self.steps:
            if s.n == n and s.plan_version == v:
                return s
        raise KeyError((v, n))
