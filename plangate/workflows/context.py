"""What every step of one plan version shares: the guarded plan, bindings, verified claims."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from pydantic import JsonValue
from temporalio import workflow

from plangate.plans import bindings
from plangate.plans.guards import GuardedPlan, StepGuard, conditions_for
from plangate.plans.limits import TOOL_HEARTBEAT_S
from plangate.plans.model import Condition, Plan, Step
from plangate.records import keys
from plangate.records.proofs import Submission
from plangate.records.read_ahead import ReadAhead
from plangate.records.report import RunReport, StepReport, StepState
from plangate.records.run import HistoryBound, RunInput
from plangate.workflows import bookkeeping

MIN_SEGMENT_EVENTS = 100


def key_tag() -> str:
    """What makes a run's idempotency keys its own: the workflow id and the first run of its
    chain (a reused workflow id gets a new first execution). Carried across continue-as-new."""
    info = workflow.info()
    return keys.chain_tag(info.workflow_id, info.first_execution_run_id)


# Issue 47: a run's bookkeeping never fails it, and the outages its guards and tools meet are
# waited out (``ending.keep``, ``guarding.resolve``, ``machine``). Asked once, as the run begins
# (docs/versioning.md): a run begun before replays as it ran.
KEPT_PATCH = "plangate-bookkeeping-kept"
# Issue 48: a step whose arguments were bound after its guards decided it is decided again,
# bound, before its card and its call (``deciding``). Implies ``KEPT_PATCH``: asked first.
BOUND_PATCH = "plangate-bound-decided"
# Issue 50: the run's status and pending cards written to the runs index as they change
# (``indexing``). Implies ``BOUND_PATCH``: asked first.
INDEX_PATCH = "plangate-runs-index"


@dataclass
class VersionContext:
    run_id: str
    guarded: GuardedPlan
    version: int
    plan_made_at: datetime
    report: RunReport
    # Values bound by completed steps of every version so far.
    bound: dict[str, JsonValue] = field(default_factory=dict)
    # condition key -> the step (n) whose verified post condition established it.
    verified: dict[str, int] = field(default_factory=dict)
    # a step's first read made ahead of it (with the guards, or with the post check of the
    # step before it: ``reads``), by n; the step takes it as it is
    prefetched: dict[int, ReadAhead] = field(default_factory=dict)
    # the run's authority and policy, from its first plan: every version acts under them
    on_behalf_of: str | None = None
    policy_bundle: str | None = None
    key_tag: str = ""
    whole_id_keys: bool = False  # the keys' format (``Resolved.whole_id_keys``)
    history: HistoryBound = field(default_factory=HistoryBound)
    # how long a step waits for a system that does not answer before it halts
    outage_patience: timedelta = timedelta(minutes=15)
    # how long a tool's call may go without a heartbeat: the worker's (``guarding.limited``)
    tool_heartbeat: timedelta = timedelta(seconds=TOOL_HEARTBEAT_S)
    # who submitted the run, signed (handed to every tool call: the principal is re-checked)
    submission: Submission | None = None
    # the history reached half its bound: steps stop at their next safe point (``Parked``)
    # and nothing new starts, so the run can continue as new
    parking: bool = False
    # issue 47's branch (``KEPT_PATCH``, asked as the run begins): outages the guards and the
    # tools meet are waited out, and bookkeeping that fails is let go
    kept: bool = False
    # issue 48's branch (``BOUND_PATCH``): a step bound after its guards is decided again
    decides_bound: bool = False
    # this version's entries of the report, by n, as found: a step asks for its own and the
    # others' (their states) about 90 times a step of a 31-step plan, and ``RunReport.step``
    # reads the whole list (issue 50). Entries are only ever added, never replaced.
    found: dict[int, StepReport] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of_run(
        cls, report: RunReport, inp: RunInput, outage_patience: timedelta, kept: bool = False,
        decides_bound: bool = False,
    ) -> VersionContext:
        """The context a run begins with, before its guards are derived: what an earlier run of
        its chain carried (``inp.carried``), else its first plan's authority and policy, which
        every version acts under whatever a re-plan says."""
        c = inp.carried
        made_at = (inp.plan_made_at or workflow.info().start_time) if c is None else c.plan_made_at
        authority = inp.plan if c is None else c
        return cls(
            run_id=report.run_id, guarded=GuardedPlan(plan=inp.plan), report=report,
            version=0 if c is None else c.version, plan_made_at=made_at,
            key_tag=key_tag() if c is None else c.key_tag, history=inp.history,
            whole_id_keys=False if c is None else c.whole_id_keys,
            outage_patience=outage_patience, submission=inp.submission,
            on_behalf_of=authority.on_behalf_of, policy_bundle=authority.policy_bundle,
            bound={} if c is None else dict(c.bound),
            verified={} if c is None else dict(c.verified), kept=kept,
            decides_bound=decides_bound,
        )

    def following(self, plan: GuardedPlan, version: int, made_at: datetime) -> VersionContext:
        """The context of plan version ``version``: the run's authority, limits, bindings and
        verified claims carried over; nothing of this version's own (its reads ahead)."""
        return replace(
            self, guarded=plan, version=version, plan_made_at=made_at, bound=dict(self.bound),
            verified=dict(self.verified), prefetched={}, parking=False, found={},
        )

    def over_bound(self) -> bool:
        """Whether steps must park now (decided once, at a deterministic point: the history's
        length and size are part of every workflow task)."""
        if self.parking:
            return True
        info = workflow.info()
        length = info.get_current_history_length()
        if length < MIN_SEGMENT_EVENTS:  # a run makes progress before it continues as new
            return False
        over = (
            length >= self.history.events // 2
            or info.get_current_history_size() >= self.history.bytes // 2
            or info.is_continue_as_new_suggested()
        )
        if over:
            self.parking = True
        return self.parking

    @property
    def plan(self) -> Plan:
        return self.guarded.plan

    def guard(self, n: int) -> StepGuard:
        return self.guarded.guard(n)

    def step_report(self, n: int) -> StepReport:
        rep = self.found.get(n)
        if rep is None or rep.plan_version != self.version:  # a copy of another version's
            rep = self.found[n] = self.report.step(n, self.version)
        return rep

    def set_state(self, n: int, state: StepState, fold: bool = False) -> None:
        bookkeeping.set_state(self.step_report(n), state, fold)

    def state(self, n: int) -> StepState:
        return self.step_report(n).state

    def idempotency_key(self, n: int) -> str:
        """Stable across retries, worker crashes and replays; unique per run (a reused workflow
        id gets a new first execution) and per plan version (``records.keys``)."""
        tag, call = self.key_tag or key_tag(), keys.step_call(self.version, n)
        if self.whole_id_keys:
            return keys.idempotency_key(self.run_id, tag, call)
        return keys.prefix_key(self.run_id, tag, call)

    def resolve_conditions(
        self, conds: list[Condition], where: str, bound: dict[str, JsonValue] | None = None
    ) -> list[Condition]:
        values = self.bound if bound is None else bound
        return [
            Condition(
                probe=c.probe,
                args=bindings.resolve(c.args, values, f"{where}[{i}]"),
                wait=c.wait,
            )
            for i, c in enumerate(conds)
        ]

    def promised_post(self, step: Step) -> list[Condition]:
        """The shared-world claims a step will be held to, as far as they can be bound now.
        Field probes are left out: they read the step's own record, so no other step can owe
        or destroy the same claim by name."""
        try:
            args = bindings.resolve(step.args, self.bound)
            plan_post = self.resolve_conditions(step.post, "post")
        except bindings.BindingError:
            return []
        systems = self.guarded.systems
        return [
            c
            for c in conditions_for(self.guard(step.n), "post", args, plan_post)
            if systems.get(c.probe, "record") != "record"
        ]

    def descendants(self, n: int) -> set[int]:
        out: set[int] = set()
        frontier = {n}
        while frontier:
            frontier = {s.n for s in self.plan.steps if set(s.depends_on) & frontier} - out
            out |= frontier
        return out

    def unfinished_owner(self, cond: Condition, asking: int) -> int | None:
        """A step of this plan, not finished yet and not waiting on the asking step, whose
        post condition is this very claim."""
        later = self.descendants(asking)
        for s in self.plan.steps:
            if s.n == asking or s.n in later or self.state(s.n).final:
                continue
            if any(p.key() == cond.key() for p in self.promised_post(s)):
                return s.n
        return None
