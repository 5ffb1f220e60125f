"""The input of a plan run, and what a run carries into the next when it continues as new."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field, JsonValue

from plangate.plans._base import Model
from plangate.plans.guards import DEFAULT_APPROVAL_TTL_S, GuardedPlan, PolicyMark, StepGuard
from plangate.plans.model import Effect, Plan
from plangate.records.proofs import Submission
from plangate.records.read_ahead import ReadAhead
from plangate.records.report import FailureRecord, RunReport, StepState

MIB = 1024 * 1024


class HistoryBound(Model):
    """The most a run's history may hold, in events and bytes, before the run continues as new
    (docs/long-runs.md). A run begins to continue as new at half the bound (or when the server
    suggests it); the other half is room for the steps in flight to reach a point where they can
    stop. Temporal warns at 10,240 events or 10 MiB and ends a run at 51,200 or 50 MiB."""

    events: int = Field(default=10_240, ge=200)
    bytes: int = Field(default=10 * MIB, ge=64 * 1024)

    def within(self, other: HistoryBound) -> HistoryBound:
        """The smaller of the two bounds, each field on its own."""
        return HistoryBound(
            events=min(self.events, other.events), bytes=min(self.bytes, other.bytes)
        )


class ParkedAt(StrEnum):
    """Where a step stopped for the run to continue as new: points where nothing is in flight."""

    START = "start"  # before an attempt (its first, after a retry's back-off, after a wait)
    POST_WAIT = "post_wait"  # the call acted; its post conditions are being waited for
    APPROVAL = "approval"  # a card waits for a person


class Parked(Model):
    """A step stopped at a safe point, with what it needs to go on in the next run."""

    n: int
    at: ParkedAt
    attempt: int  # START: attempts made so far; otherwise the attempt in progress
    resume_at: datetime | None = None  # not before (a back-off, the next read of a wait)
    # POST_WAIT: the call's arguments as sent, its result and references, the reads so far
    args: dict[str, JsonValue] | None = None
    refs: dict[str, JsonValue] | None = None
    output: dict[str, JsonValue] | None = None
    reads: int = 0
    read_back: bool = False  # the wait follows a read-back by idempotency key
    cards: int = 0  # APPROVAL: cards issued in this attempt before the pending one


class Carried(Model):
    """A run's state across continue-as-new: the report (approvals pending included), the
    bindings and verified claims, the steps parked and the version's failure so far."""

    report: RunReport
    samples: dict[str, list[float]] = Field(default_factory=dict)
    version: int  # the plan version of ``RunInput.plan``
    begun: bool  # whether that version's steps are in the report already
    plan_made_at: datetime
    key_tag: str  # of idempotency keys: the same in every run of the chain
    whole_id_keys: bool = False  # ``Resolved.whole_id_keys``, as the chain's first run took it
    bound: dict[str, JsonValue] = Field(default_factory=dict)
    verified: dict[str, int] = Field(default_factory=dict)
    parked: list[Parked] = Field(default_factory=list)
    failure: FailureRecord | None = None
    failed_state: StepState | None = None
    on_behalf_of: str | None = None
    policy_bundle: str | None = None


class RunInput(Model):
    # the plan alone: its guards are the worker's own (``GuardRequest``), so an input has no
    # room for them
    plan: Plan
    # who submitted the run, signed (``records.proofs``): a deployment that lists submitters
    # takes a run only with it. Carried across continue-as-new.
    submission: Submission | None = None
    plan_made_at: datetime | None = None  # when the plan was written, if the caller knows
    history: HistoryBound = Field(default_factory=HistoryBound)
    # how long a step waits for a system that does not answer, then halts (docs/faults.md)
    outage_patience_s: float = Field(default=900.0, ge=0)
    carried: Carried | None = None  # set when an earlier run of the chain continued as new
    # the namespace has plangate's search attributes registered (``records.visibility``), as
    # the client found at submission: only then does the run upsert them (an unregistered one
    # would fail its workflow task forever). Carried across continue-as-new.
    search_attributes: bool = False


class CancelRequest(Model):
    """The ``cancel`` signal: why, and who asks."""

    reason: str = Field(default="", max_length=2000)
    requester: str = Field(default="", max_length=200)


class GuardRequest(Model):
    """What the worker derives a plan version's guards from (``activities.guarding``): the
    plan and what only the run knows; never what protects it."""

    plan: Plan
    version: int  # 1: the plan submitted; more: a re-plan (its money steps need fresh cards)
    workflow_id: str
    submission: Submission | None = None
    # when Temporal started this run; None for a run that continued as new (its first run
    # judged the submission's age)
    started_at: datetime | None = None
    # the first run of this run's chain (Temporal's; a reset and a continue-as-new keep it): a
    # submission starts one chain, and this is the one it is claimed for, in every run of it
    # (a continuation forged by a stranger's own workflow is a chain of its own)
    first_run_id: str | None = None
    # the run's principal and policy, once decided (versions after the first)
    on_behalf_of: str | None = None
    policy_bundle: str | None = None
    # the steps that start first, by n, with their calls' idempotency keys: the worker reads
    # what each reads before its call in the same activity, with the guards it derived (one
    # local activity, not two, before the first step acts)
    reads: dict[int, str] = Field(default_factory=dict)


class Resolved(Model):
    """A plan version's guards as this deployment derives them, with what the workflow needs
    to judge answers to its cards; or why the run may not act at all. The plan itself is not
    sent back (the workflow has it): only what guards it."""

    guards: dict[int, StepGuard]
    systems: dict[str, str] = Field(default_factory=dict)
    approval_ttl_s: float = DEFAULT_APPROVAL_TTL_S
    approvers: dict[str, str] = Field(default_factory=dict)  # name -> public key, base64
    submitter: str | None = None  # who submitted the run, proven
    submitter_key: str | None = None  # its public key, base64
    on_behalf_of: str | None = None
    # the policy the run is decided under: the plan's, else the one in force at its start
    policy_bundle: str | None = None
    # set: the run acts on nothing (the code and status it fails with, and why)
    refusal: str | None = None
    refusal_code: str = "not_permitted"
    # ``GuardRequest.reads``, read: each step's first read, by n (absent: the step reads itself)
    reads: dict[int, ReadAhead] = Field(default_factory=dict)
    # the deployment's limits on the run; its input may ask for less, never more (None: said
    # by a worker before them, whose runs took the input's)
    outage_patience_s: float | None = None
    history: HistoryBound | None = None
    # the deployment's heartbeat timeout of a tool's call, never the input's (None: said by a
    # worker before it: 30 s)
    tool_heartbeat_s: float | None = None
    # the run's idempotency keys begin with a digest of its whole workflow id
    # (``records.keys``); False: said by a worker before them, whose runs keep the old keys
    whole_id_keys: bool = False

    def guarded(self, plan: Plan) -> GuardedPlan:
        return GuardedPlan(
            plan=plan, guards=self.guards, systems=self.systems,
            approval_ttl_s=self.approval_ttl_s,
        )


class DecideRequest(Model):
    """A step's call put to the deployment's policies with its arguments bound
    (``guard.decide``): where its version's guards decided it as written, a ``${name}`` still
    unbound was left out, and an amount over a people threshold never asked for its card."""

    workflow_id: str
    plan_version: int
    step: int
    tool: str
    effect: Effect  # the step's, from its guards
    args: dict[str, JsonValue]  # bound
    on_behalf_of: str | None = None
    approval_asked: bool = False  # the guards ask a person already


class Decided(Model):
    """What the policies in force decided of the bound call; None: no Cedar policies (or none
    readable now: the call decides, and refuses, itself)."""

    policy: PolicyMark | None = None


class ApproversRequest(Model):
    """Who may answer a card now (``guard.approvers``): asked by the workflow where it records
    an answer, so that a key the deployment no longer lists neither approves nor rejects."""

    workflow_id: str


class Approvers(Model):
    approvers: dict[str, str] = Field(default_factory=dict)  # name -> public key, base64
