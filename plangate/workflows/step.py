"""One step at hand, and the values its stages hand back.

Every stage of a step's lifecycle (``probing``, ``approval``, ``dispatch``, ``verification``,
the ``reads`` at the call) is a function of a ``StepScope`` (the version's context, the step,
its guard and report, the attempt) that returns what happened as a value: ``Finished``,
``Failed``, ``Unknown``, ``Owed`` or ``Park``. The ``machine`` decides by ``match`` on them;
no exception steers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from pydantic import JsonValue
from temporalio import workflow

from plangate.plans import bindings
from plangate.plans.guards import step_conditions, version_condition, with_version
from plangate.plans.model import Condition, Step
from plangate.records import options
from plangate.records.calls import ProbeResult, StepRef
from plangate.records.codes import CODES
from plangate.records.proofs import ApprovalGrant
from plangate.records.report import Attribution, FailureRecord, StepState
from plangate.records.run import Parked, ParkedAt
from plangate.workflows import metrics
from plangate.workflows.context import VersionContext
from plangate.workflows.router import Kind, Refused, Route, Situation, route


@dataclass(frozen=True)
class StepOutcome:
    n: int
    state: StepState  # DONE, SKIPPED, or the state of a final failure
    failure: FailureRecord | None = None
    parked: Parked | None = None  # stopped for the run to continue as new (not an end)

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass(frozen=True)
class Finished:
    state: StepState  # DONE or SKIPPED
    args: dict[str, JsonValue]  # as resolved for the call
    output: dict[str, JsonValue] | None = None


@dataclass(frozen=True)
class Failed:
    decision: Route
    failure: FailureRecord


@dataclass(frozen=True)
class Unknown:
    """The call may have acted and nobody can say. ``if_absent``: the answer when a read of the
    world by idempotency key shows it did not act."""

    decision: Route
    failure: FailureRecord
    if_absent: Route


@dataclass(frozen=True)
class Owed:
    """A pre condition a concurrent step of this plan still owes: wait for that step."""

    decision: Route
    owner: int
    cond: Condition


@dataclass(frozen=True)
class Park:
    """The step stopped at a safe point for the run to continue as new: nothing of it is in
    flight, and ``parked`` is what the next run of the chain goes on from."""

    parked: Parked


@dataclass(frozen=True)
class Held:
    """The pre conditions held: what they read (versions for a write and a card included)."""

    results: list[ProbeResult]


@dataclass(frozen=True)
class Prepared:
    """One attempt's resolved arguments and conditions."""

    args: dict[str, JsonValue]
    pre: list[Condition]
    post: list[Condition]
    ref: StepRef
    key: str
    grant: ApprovalGrant | None = None  # a person approved this very call: the proof of it


Attempt = Finished | Failed | Unknown | Owed | Park


def observed(results: list[ProbeResult]) -> dict[str, JsonValue]:
    """What each pre condition observed, by its claim: what a card shows, and what a re-read
    after the approval must find again."""
    return {r.condition.key(): r.observed for r in results}


class StepScope:
    """What every stage of one step reads and writes."""

    def __init__(
        self, ctx: VersionContext, step: Step, also_bound: dict[str, JsonValue] | None = None
    ) -> None:
        self.ctx = ctx
        self.step = step
        self.guard = ctx.guard(step.n)
        self.effect = self.guard.effect
        self.rep = ctx.step_report(step.n)
        self.attempt = 0
        self.also_bound = also_bound or {}  # what a step just before will bind (a fused read)
        # pre conditions (by key) this attempt has read only at the call, not before it: the
        # read made ahead of it left them to the call (``ReadAhead.at_call``)
        self.read_at_call_only: set[str] = set()

    @property
    def n(self) -> int:
        return self.step.n

    def set_state(self, state: StepState, fold: bool = False) -> None:
        self.ctx.set_state(self.step.n, state, fold)

    def parked(self, at: ParkedAt, **kw: object) -> Parked:
        return Parked.model_validate({"n": self.step.n, "at": at, "attempt": self.attempt, **kw})

    async def pause(self, until: datetime, parked: Parked, summary: str) -> Park | None:
        """Sleep until ``until`` (a durable timer, ``summary`` its line in the Web UI), unless
        the run must continue as new first: then the step parks, to go on at ``until`` in the
        next run."""
        if self.ctx.over_bound():
            return Park(parked.model_copy(update={"resume_at": until}))
        delay = until - workflow.now()
        if delay <= timedelta(0):
            return None
        try:
            await workflow.wait_condition(
                lambda: self.ctx.parking, timeout=delay, timeout_summary=summary
            )
        except TimeoutError:
            return None
        return Park(parked.model_copy(update={"resume_at": until}))

    # -- the attempt's arguments and conditions ------------------------------------------------
    def prepare(self) -> Prepared | Failed:
        bound = {**self.ctx.bound, **self.also_bound}
        try:
            args = bindings.resolve(self.step.args, bound, "args")
            pre, post = step_conditions(
                self.guard, args, self.ctx.resolve_conditions(self.step.pre, "pre", bound),
                self.ctx.resolve_conditions(self.step.post, "post", bound),
            )
        except bindings.BindingError as e:
            d = route(self.situation(Kind.TOOL_ERROR))
            return Failed(d, self.coded("unbound_reference", str(e)))
        return Prepared(args, pre, post, self.ref(args), self.ctx.idempotency_key(self.step.n))

    def ref(self, args: dict[str, JsonValue]) -> StepRef:
        return StepRef(
            run_id=self.ctx.run_id, plan_version=self.ctx.version, n=self.step.n,
            tool=self.step.tool, args=args,
        )

    def carry_version(self, p: Prepared, checked: Held) -> Prepared:
        """The call's arguments with the version the step's own pre probe observed (unless the
        plan chose one): the system refuses the write if the resource moved since the read."""
        cond = version_condition(self.guard, p.args)
        if cond is None:
            return p
        key = cond.key()
        seen = next((r.observed for r in checked.results if r.condition.key() == key), None)
        args = with_version(self.guard, p.args, seen)
        return replace(p, args=args, ref=self.ref(args))

    # -- answers and failures --------------------------------------------------------------------
    def situation(
        self,
        kind: Kind,
        *,
        owed: bool = False,
        waits: bool = False,
        refused: Refused | None = None,
        retryable: bool = False,
    ) -> Situation:
        return Situation(
            kind=kind, effect=self.effect, on_unmet=self.step.on_unmet,
            owed_by_unfinished_step=owed, waits=waits, refused=refused, retryable=retryable,
            retries_left=self.attempt < options.STEP_ATTEMPTS,
        )

    def decide(self, d: Route, again: bool = False) -> None:
        """``again``: the answer the step already has, to a later read of the same wait (the
        report shows it once; so does the metric)."""
        self.rep.answer = d.answer
        self.rep.reason = d.reason
        if not again:
            metrics.answer(d.answer.value, self.step.tool)

    def failure(
        self,
        code: str,
        retryable: bool,
        detail: str,
        *,
        status: int | None = None,
        attribution: Attribution | None = None,
        established_by: int | None = None,
    ) -> FailureRecord:
        """``status``: the tool's own, as it sent it (a report shows it)."""
        return FailureRecord(
            step=self.step.n, tool=self.step.tool, plan_version=self.ctx.version, code=code,
            status=status, retryable=retryable, detail=detail, attribution=attribution,
            established_by=established_by,
        )

    def coded(self, code: str, detail: str) -> FailureRecord:
        """A failure of a code in ``records.codes``, with the status and retryability there."""
        c = CODES[code]
        return self.failure(code, c.retryable, detail, status=c.status)
