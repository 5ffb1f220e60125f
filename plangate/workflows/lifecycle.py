"""The lifecycle of one step: PROBING -> EXECUTING -> VERIFYING -> DONE, and the answers to a
failed check. EXECUTING is reachable only from a PROBING that passed in the same attempt; DONE
only from a VERIFYING whose every post condition held on a fresh read.

Each stage returns what happened as a value (``Finished``, ``Failed``, ``Unknown``, ``Owed``)
and ``run`` decides by ``match``; the activity calls and their failures are ``workflows.calls``,
the report is kept by ``workflows.bookkeeping``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from pydantic import JsonValue, ValidationError
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from plangate.plans import bindings, jsonpath, limits
    from plangate.plans.guards import first_read, step_conditions, version_condition, with_version
    from plangate.plans.model import Condition, Step
    from plangate.records.approvals import ApprovalCard, ApprovalRecord, CardStatus
    from plangate.records.calls import (
        Outcome,
        ProbeReport,
        ProbeRequest,
        ProbeResult,
        StepRef,
        ToolCall,
    )
    from plangate.records.proofs import ApprovalGrant
    from plangate.records.report import (
        Answer,
        Attribution,
        CancelOutcome,
        CompletedStep,
        FailureRecord,
        Phase,
        StepState,
    )
    from plangate.records.run import Parked, ParkedAt
    from plangate.workflows import bookkeeping, calls, metrics, options, summaries
    from plangate.workflows.context import VersionContext
    from plangate.workflows.router import Decision, Kind, Situation, route


# Reads of a post condition with ``wait`` are due at 0, 1, 2, ... intervals after the first, up to
# and including the deadline: a wait of 3600 s read every 60 s reads 61 times. Runs that began
# before this patch keep the rule they started with (the next read had to be due by the clock
# before the deadline, so the time the reads took could cost the last one).
WAIT_SCHEDULE_PATCH = "post-wait-reads-on-schedule"
# Runs that began before it read the next step's first condition on its own.
FUSED_READS_PATCH = "fused-reads"


# A read or write whose call was lost (its worker died, or it timed out after its attempts) is
# tried again like a transient fault, while the step has attempts left, instead of re-planned at
# once: every attempt reads the world first, so a write that landed is found done (skipped on its
# evidence, or its version-bound retry is refused with 412 and re-evaluated) and one that did not
# goes again with the version its new pre probe observed. Money and external calls are read back
# by idempotency key instead (``_read_back``). Runs that began before this patch re-plan.
LOST_CALL_PATCH = "lost-call-retried"

# How a tool's activity refuses a call whose check at the call did not hold (``ToolCall.check``):
# the details carry the read.
AT_CALL_REFUSALS = ("precondition_failed", "probe_unknown")

# The next step's first read, fused into this step's post check: (its n, what it reads, which
# of those are read only as evidence to skip)
Successor = tuple[int, list[Condition], list[str]]


def _next_read_in_time(
    reads: int, interval: timedelta, timeout: timedelta, deadline: datetime, recent: bool
) -> bool:
    if recent or workflow.patched(WAIT_SCHEDULE_PATCH):
        return interval * reads <= timeout
    return workflow.now() + interval <= deadline


@dataclass(frozen=True)
class StepOutcome:
    n: int
    state: StepState  # DONE, SKIPPED, or the state of a final failure
    failure: FailureRecord | None = None
    parked: Parked | None = None  # stopped for the run to continue as new (not an end)

    @property
    def ok(self) -> bool:
        return self.failure is None


class _Park(Exception):
    """A step stops at a safe point for the run to continue as new (``StepRunner.run``)."""

    def __init__(self, parked: Parked) -> None:
        super().__init__(f"step {parked.n} parked at {parked.at}")
        self.parked = parked


@dataclass(frozen=True)
class Finished:
    state: StepState  # DONE or SKIPPED
    args: dict[str, JsonValue]  # as resolved for the call
    output: dict[str, JsonValue] | None = None


@dataclass(frozen=True)
class Failed:
    decision: Decision
    failure: FailureRecord


@dataclass(frozen=True)
class Unknown:
    """The call may have acted and nobody can say. ``if_absent``: the answer when a read of the
    world by idempotency key shows it did not act."""

    decision: Decision
    failure: FailureRecord
    if_absent: Decision


@dataclass(frozen=True)
class Owed:
    """A pre condition a concurrent step of this plan still owes: wait for that step."""

    decision: Decision
    owner: int
    cond: Condition


@dataclass(frozen=True)
class Checked:
    """The pre conditions held: what they read (versions for a write and a card included)."""

    results: list[ProbeResult]


def observed(results: list[ProbeResult]) -> dict[str, JsonValue]:
    """What each pre condition observed, by its claim: what a card shows, and what a re-read
    after the approval must find again."""
    return {r.condition.key(): r.observed for r in results}


@dataclass(frozen=True)
class Prepared:
    """One attempt's resolved arguments and conditions."""

    args: dict[str, JsonValue]
    pre: list[Condition]
    post: list[Condition]
    ref: StepRef
    key: str
    grant: ApprovalGrant | None = None  # a person approved this very call: the proof of it


Attempt = Finished | Failed | Unknown | Owed


class StepRunner:
    def __init__(
        self,
        ctx: VersionContext,
        step: Step,
        also_bound: dict[str, JsonValue] | None = None,
        resume: Parked | None = None,
    ) -> None:
        self.ctx = ctx
        self.step = step
        self.guard = ctx.guard(step.n)
        self.effect = self.guard.effect
        self.rep = ctx.step_report(step.n)
        self.attempt = 0
        self.also_bound = also_bound or {}  # what a step just before will bind (a fused read)
        self.resume = resume  # where an earlier run of the chain parked this step
        # pre conditions (by key) this attempt has read only at the call, not before it: the
        # fused read after the step before left them to the call (``_fused_first``)
        self.read_at_call_only: set[str] = set()

    # -- the whole step, with workflow-level retries ------------------------------------------
    async def run(self) -> StepOutcome:
        try:
            return await self._run()
        except _Park as park:
            return StepOutcome(self.step.n, self.ctx.state(self.step.n), parked=park.parked)

    def _parked(self, at: ParkedAt, **kw: object) -> Parked:
        return Parked.model_validate({"n": self.step.n, "at": at, "attempt": self.attempt, **kw})

    async def _pause(self, until: datetime, parked: Parked) -> None:
        """Sleep until ``until`` (a durable timer), unless the run must continue as new first:
        then the step parks, to go on at ``until`` in the next run."""
        if self.ctx.over_bound():
            raise _Park(parked.model_copy(update={"resume_at": until}))
        delay = until - workflow.now()
        if delay <= timedelta(0):
            return
        try:
            await workflow.wait_condition(lambda: self.ctx.parking, timeout=delay)
        except TimeoutError:
            return
        raise _Park(parked.model_copy(update={"resume_at": until}))

    async def _run(self) -> StepOutcome:
        resume, self.resume = self.resume, None
        if resume is not None:
            self.attempt = resume.attempt
            if resume.at is ParkedAt.START:
                if resume.resume_at is not None:
                    await self._pause(resume.resume_at, resume)
                resume = None
        while True:
            if resume is None:
                if self.ctx.over_bound():
                    raise _Park(self._parked(ParkedAt.START))
                self.attempt += 1
            attempt = await self._attempt(resume)
            resume = None
            match attempt:
                case Finished() as done:
                    match self._complete(done):
                        case Failed(decision=d, failure=f):
                            return self._fail(d, f)
                        case StepOutcome() as outcome:
                            return outcome
                case Owed() as owed:
                    self.attempt -= 1  # waiting for a concurrent step is not an attempt
                    expired = await self._wait_for(owed)
                    if expired is not None:
                        return self._fail(expired.decision, expired.failure)
                case Failed(decision=d) | Unknown(decision=d) if (
                    d.answer is Answer.RETRY and self.attempt < options.STEP_ATTEMPTS
                ):
                    self._decide(d)
                    due = workflow.now() + options.step_backoff(self.attempt)
                    await self._pause(due, self._parked(ParkedAt.START))
                case Failed(decision=d, failure=f) | Unknown(decision=d, failure=f):
                    return self._fail(d, f)

    async def _attempt(self, resume: Parked | None = None) -> Attempt:
        prepared = self._prepare()
        if isinstance(prepared, Failed):
            return prepared
        if resume is not None and resume.at is ParkedAt.POST_WAIT:
            return await self._resume_wait(prepared, resume)
        if resume is not None:  # APPROVAL: its card is still waiting for a person
            approved = await self._approval(prepared, None, resume)
            if not isinstance(approved, Prepared):
                return approved
            p = approved
        else:
            checked = await self._check_before(prepared)
            if not isinstance(checked, Checked):
                return checked
            p = self._carry_version(prepared, checked)
            if self.guard.approval:
                approved = await self._approval(prepared, checked)
                if not isinstance(approved, Prepared):
                    return approved
                p = approved
        acted = await self._execute(prepared, p)
        if isinstance(acted, Unknown) and self.effect.outcome_must_be_known:
            return await self._read_back(p, acted)
        return acted

    # -- PROBING --------------------------------------------------------------------------------
    def _prepare(self) -> Prepared | Failed:
        bound = {**self.ctx.bound, **self.also_bound}
        try:
            args = bindings.resolve(self.step.args, bound, "args")
            pre, post = step_conditions(
                self.guard, args, self.ctx.resolve_conditions(self.step.pre, "pre", bound),
                self.ctx.resolve_conditions(self.step.post, "post", bound),
            )
        except bindings.BindingError as e:
            d = route(self._situation(Kind.TOOL_ERROR, status=400))
            return Failed(d, self._failure("unbound_reference", False, str(e), status=400))
        return Prepared(args, pre, post, self._ref(args), self.ctx.idempotency_key(self.step.n))

    def _ref(self, args: dict[str, JsonValue]) -> StepRef:
        return StepRef(
            run_id=self.ctx.run_id, plan_version=self.ctx.version, n=self.step.n,
            tool=self.step.tool, args=args,
        )

    def _carry_version(self, p: Prepared, checked: Checked) -> Prepared:
        """The call's arguments with the version the step's own pre probe observed (unless the
        plan chose one): the system refuses the write if the resource moved since the read."""
        cond = version_condition(self.guard, p.args)
        if cond is None:
            return p
        key = cond.key()
        seen = next((r.observed for r in checked.results if r.condition.key() == key), None)
        args = with_version(self.guard, p.args, seen)
        return replace(p, args=args, ref=self._ref(args))

    async def _check_before(
        self, p: Prepared, again: Phase | None = None
    ) -> Checked | Finished | Failed | Owed:
        """Read the world before the call: is the step's effect already in place (skip), do its
        pre conditions hold. ``again``: the phase of a second read (after an approval, after a
        412), recorded as such."""
        self.ctx.set_state(self.step.n, StepState.PROBING)
        self.read_at_call_only = set()
        done, first, only = self._first_read(p)
        if not first:
            return Checked([])
        phase = again or (Phase.SKIP_PRE if done else Phase.PRE)
        fused = self.ctx.prefetched.pop(self.step.n, None)
        answer: ProbeReport | Failed | Unknown
        if again is None and fused is not None and fused[0] == [c.key() for c in first]:
            # read with the post check of the step before, nothing having run in between
            answer = fused[1]
            bookkeeping.record_check(self.ctx.report, self.rep, phase, self.attempt, answer)
        elif again is None and fused is not None and self.ctx.reads_in_call and fused[0] == [
            c.key() for c in self._fused_first(p)[0]
        ]:
            # the same, in the step before's activity; the pre conditions it left out are read
            # at this step's call, where they count
            answer = fused[1]
            bookkeeping.record_check(self.ctx.report, self.rep, phase, self.attempt, answer)
            read = set(fused[0])
            self.read_at_call_only = {c.key() for c in p.pre if c.key() not in read}
        else:
            answer = await self._probe(phase, p, first, None, lenient=only)
        if isinstance(answer, Failed | Unknown):
            return Failed(answer.decision, answer.failure)
        self.rep.timings.precheck_read_at = answer.read_at
        if done and all(r.outcome is Outcome.HOLDS for r in answer.results[: len(done)]):
            self._decide(route(self._situation(Kind.ALREADY_DONE)))
            return Finished(StepState.SKIPPED, p.args)
        pre = answer.results[len(done) :]
        return self._judge_pre(pre) or Checked(pre)

    def _fused_first(self, p: Prepared) -> tuple[list[Condition], list[str]]:
        """The step's first read as the step before's activity makes it, right after its call
        (``reads-in-call``): the skip check, and of the pre conditions only the version the
        call will carry. The others are read at the step's own call, which acts only if they
        hold, and which a read just before would only repeat. A step a person approves reads
        them all before its card is shown."""
        done, first, only = self._first_read(p)
        if self.guard.approval:
            return first, only
        version = version_condition(self.guard, p.args)
        carried = [c for c in p.pre if version is not None and c.key() == version.key()]
        return done + carried, only

    def _first_read(self, p: Prepared) -> tuple[list[Condition], list[Condition], list[str]]:
        """What the step reads before its call (``plans.guards.first_read``)."""
        return first_read(self.step, self.guard, p.args, p.pre, p.post)

    def _successor_read(
        self, output: dict[str, JsonValue] | None
    ) -> Successor | None:
        """The first read of the one step that depends on this one alone, to be fused into
        this step's post check: one read of the world instead of two, when nothing else runs.
        Not for a step whose first read needs its own record (field probes)."""
        ctx = self.ctx
        if not (ctx.recent or workflow.patched(FUSED_READS_PATCH)):
            return None
        nxt_step = self._alone()
        if nxt_step is None:
            return None
        binds: dict[str, JsonValue] = {}
        for name, path in self.step.binds.items():
            try:
                binds[name] = jsonpath.get(output or {}, path)
            except jsonpath.PathError:
                return None
        nxt = StepRunner(ctx, nxt_step, also_bound=binds)
        prepared = nxt._prepare()
        if isinstance(prepared, Failed):
            return None
        if ctx.reads_in_call:
            first, only = nxt._fused_first(prepared)
        else:
            _, first, only = nxt._first_read(prepared)
        systems = ctx.guarded.systems
        if not first or any(systems.get(c.probe, "record") == "record" for c in first):
            return None
        return nxt_step.n, first, only

    def _alone(self) -> Step | None:
        """The one step that depends on this one alone, while it has not begun and no other
        step runs: nothing can come between this step's read after its call and that step's
        first read."""
        ctx, n = self.ctx, self.step.n
        after = [s for s in ctx.plan.steps if s.depends_on == [n]]
        busy = [
            s for s in ctx.plan.steps
            if s.n != n and ctx.state(s.n) not in (StepState.PENDING, StepState.DONE,
                                                   StepState.SKIPPED)
        ]
        if len(after) != 1 or busy or ctx.state(after[0].n) is not StepState.PENDING:
            return None
        return after[0]

    def _judge_pre(self, results: list[ProbeResult]) -> Failed | Owed | None:
        failed = [r for r in results if r.outcome is not Outcome.HOLDS]
        if not failed:
            return None
        first = failed[0]
        owner = self.ctx.unfinished_owner(first.condition, self.step.n)
        d = route(self._situation(Kind.PRE_VIOLATED, owed_by_unfinished_step=owner is not None))
        if d.answer is Answer.WAIT and owner is not None:
            return Owed(d, owner, first.condition)
        by = self.ctx.verified.get(first.condition.key())
        return Failed(
            d,
            self._failure(
                "precondition_unmet", False, f"{first.condition.key()}: {first.detail}",
                attribution=Attribution.DESTROYED if by is not None else None, established_by=by,
            ),
        )

    async def _wait_for(self, owed: Owed) -> Failed | None:
        """Wait for the owner of a missing state to finish; then the step probes again."""
        self._decide(owed.decision)
        self.ctx.set_state(self.step.n, StepState.WAITING)
        c = owed.cond
        limit = c.wait.timeout_s if c.wait else options.DEFAULT_WAIT.total_seconds()
        if self.ctx.over_bound():  # probes again in the next run
            raise _Park(self._parked(ParkedAt.START))
        try:
            await workflow.wait_condition(
                lambda: self.ctx.state(owed.owner).final or self.ctx.parking,
                timeout=timedelta(seconds=limit),
            )
        except TimeoutError:
            d = route(self._situation(Kind.PRE_VIOLATED))
            detail = f"{c.key()}: step {owed.owner} did not establish it within {limit:.0f}s"
            return Failed(d, self._failure("wait_expired", False, detail))
        if not self.ctx.state(owed.owner).final:
            raise _Park(self._parked(ParkedAt.START))
        return None

    # -- AWAITING_APPROVAL ------------------------------------------------------------------------
    async def _approval(
        self, base: Prepared, checked: Checked | None, resume: Parked | None = None
    ) -> Prepared | Attempt:
        """A person approves the exact effect: a card (what, to what, as whom, until when) and
        its digest. After the approval the step reads the world again immediately before the
        call: an approval lengthens the window, it never replaces the check. If what the probes
        observe changed since the card, the approval no longer matches: a new card.
        ``resume``: the card an earlier run of the chain issued is waiting still."""
        first = resume.cards if resume is not None else 0
        for cards in range(first, options.APPROVAL_CARDS):
            if checked is None:
                record = self._waiting_card()
            else:
                record = self._publish(self._carry_version(base, checked), checked)
            refused = await self._await_answer(record, cards)
            if refused is not None:
                return refused
            again = await self._check_before(base, Phase.RE_PROBE)
            if not isinstance(again, Checked):
                return again
            if observed(again.results) == record.card.observed:
                return replace(self._carry_version(base, again), grant=self._grant(record))
            record.status = CardStatus.SUPERSEDED
            checked = again
        d = route(self._situation(Kind.APPROVAL_REFUSED))
        why = f"the world moved under {options.APPROVAL_CARDS} approved cards in a row"
        return Failed(d, self._failure("approval_superseded", False, why))

    def _grant(self, record: ApprovalRecord) -> ApprovalGrant | None:
        """The approved card and its proof, for the tool's activity to verify again."""
        answer = record.answer
        if not self.ctx.own_guards or answer is None or answer.proof is None:
            return None
        return ApprovalGrant(card=record.card, digest=record.digest, proof=answer.proof)

    def _publish(self, p: Prepared, checked: Checked) -> ApprovalRecord:
        now = workflow.now()
        card = ApprovalCard(
            run_id=self.ctx.run_id, plan_version=self.ctx.version, step=self.step.n,
            tool=self.step.tool, effect=self.effect, args=p.args,
            observed=observed(checked.results), on_behalf_of=self.ctx.on_behalf_of,
            policy_bundle=self.ctx.policy_bundle, issued_at=now,
            expires_at=now + timedelta(seconds=self.ctx.guarded.approval_ttl_s),
            idempotency_key=p.key if self.ctx.own_guards else None,
        )
        record = ApprovalRecord(
            step=self.step.n, plan_version=self.ctx.version, digest=card.digest(),
            expires_at=card.expires_at, card=card,
        )
        self.ctx.report.approvals.append(record)
        metrics.approval_requested(self.step.tool)
        self.ctx.set_state(self.step.n, StepState.AWAITING_APPROVAL)
        bookkeeping.refresh_status(self.ctx.report)
        return record

    @staticmethod
    def _waited(record: ApprovalRecord) -> float:
        return (workflow.now() - record.card.issued_at).total_seconds() * 1000

    def _waiting_card(self) -> ApprovalRecord:
        for record in reversed(self.ctx.report.approvals):
            if (record.step, record.plan_version) == (self.step.n, self.ctx.version):
                return record
        raise RuntimeError(f"step {self.step.n} parked at its approval, but it has no card")

    async def _await_answer(self, record: ApprovalRecord, cards: int) -> Failed | None:
        parked = self._parked(ParkedAt.APPROVAL, cards=cards)
        if record.status is CardStatus.PENDING and self.ctx.over_bound():
            raise _Park(parked)
        try:
            await workflow.wait_condition(
                lambda: record.status is not CardStatus.PENDING or self.ctx.parking,
                timeout=record.expires_at - workflow.now(),
            )
        except TimeoutError:
            record.status = CardStatus.EXPIRED
        except asyncio.CancelledError:  # the run was cancelled: the card waits no longer
            metrics.approval_answered(self.step.tool, "cancelled", self._waited(record))
            raise
        if record.status is CardStatus.PENDING:  # the run continues as new: the card carries
            raise _Park(parked)
        waited = self._waited(record)
        self.ctx.report.sample("approval_wait_ms", waited)
        metrics.approval_answered(self.step.tool, record.status.value, waited)
        bookkeeping.refresh_status(self.ctx.report)
        if record.status is CardStatus.APPROVED:
            return None
        d = route(self._situation(Kind.APPROVAL_REFUSED))
        if record.status is CardStatus.REJECTED and record.answer is not None:
            who = record.answer.by or "someone"
            why = f"card {record.digest[:12]} rejected by {who}: {record.answer.reason}"
            return Failed(d, self._failure("approval_rejected", False, why))
        why = f"card {record.digest[:12]} expired unanswered at {record.expires_at.isoformat()}"
        return Failed(d, self._failure("approval_expired", False, why))

    # -- EXECUTING and VERIFYING --------------------------------------------------------------
    async def _execute(self, base: Prepared, p: Prepared) -> Finished | Failed | Unknown | Owed:
        self.ctx.set_state(self.step.n, StepState.EXECUTING)
        self.rep.timings.dispatched_at = workflow.now()
        check, after, lenient, successor = self._reads_at_call(p)
        call = ToolCall(
            step=p.ref, idempotency_key=p.key,
            on_behalf_of=self.ctx.on_behalf_of, policy_bundle=self.ctx.policy_bundle,
            check=check, after=after, after_lenient=lenient,
            approval_required=self.guard.approval and self.ctx.own_guards, approval=p.grant,
            submission=self.ctx.submission,
        )
        try:
            summary = None
            if self.ctx.recent:
                summary = summaries.tool(self.step.n, self.ctx.version, self.step.tool, p.args)
            answer = await calls.call_tool(self.step.tool, call, self.effect, summary)
        except asyncio.CancelledError:
            # the run was cancelled while the call was in flight (and has ended: the activity
            # waits for its cancellation to complete): what really happened, read by probes
            await self._read_after_cancel(p)
            raise
        match answer:
            case calls.CallFailed(failure=tf) if tf.status == 412:
                # superseded (a moved version, a changed policy): read the world again, then
                # re-plan; never a blind retry. A refusal at the call carries what it read:
                # when what failed there had not been read before, it is the step's pre check
                # failing (answered as such), not the world moving between check and use.
                self.rep.attempts += tf.attempt
                refused = None
                if check and tf.code in AT_CALL_REFUSALS:
                    refused = self._record_at_call(tf.data)
                unread = refused is not None and self._read_at_call_only(refused)
                if not unread:
                    bookkeeping.count_answer(self.ctx.report, self.rep, 412, tf.code)
                again = await self._check_before(base, Phase.PRE if unread else Phase.RE_EVALUATE)
                if not isinstance(again, Checked):
                    return again
                if unread:  # it held again a moment later: the world moves under the step
                    bookkeeping.count_answer(self.ctx.report, self.rep, 412, tf.code)
                d = route(self._situation(Kind.TOOL_ERROR, status=412))
                return Failed(d, self._failure(tf.code, False, tf.detail, status=412))
            case calls.CallFailed(failure=tf):
                self.rep.attempts += tf.attempt
                if check and tf.code in AT_CALL_REFUSALS:
                    self._record_at_call(tf.data)
                bookkeeping.count_answer(self.ctx.report, self.rep, tf.status, tf.code)
                d = route(
                    self._situation(Kind.TOOL_ERROR, status=tf.status, retryable=tf.retryable)
                )
                failure = self._failure(tf.code, tf.retryable, tf.detail, status=tf.status)
                return Unknown(d, failure, d) if tf.may_have_acted else Failed(d, failure)
            case calls.CallLost(detail=detail):
                d = route(self._situation(Kind.OUTCOME_UNKNOWN))
                # certainly not done: a transient failure, tried again with the same key
                absent = route(self._situation(Kind.TOOL_ERROR, status=503, retryable=True))
                failure = self._failure("outcome_unknown", False, detail)
                lost_call = self.ctx.own_guards or workflow.patched(LOST_CALL_PATCH)
                if not self.effect.outcome_must_be_known and lost_call:
                    return Unknown(absent, failure, absent)
                return Unknown(d, failure, absent)
            case calls.Called(result=result):
                bookkeeping.record_call(self.ctx.report, self.rep, result, self.attempt)
                bookkeeping.record_result(self.ctx.report, self.rep, result.output)
                self.ctx.set_state(self.step.n, StepState.VERIFYING)
                first = None
                if after:
                    first = self._read_after_call(p, after, result.after, successor)
                    if first is not None and first.all_hold:
                        return Finished(StepState.DONE, p.args, result.output)
                    successor = None
                else:
                    successor = self._successor_read(result.output)
                verified = await self._verify(
                    p, result.refs, successor, output=result.output, first=first
                )
                return verified or Finished(StepState.DONE, p.args, result.output)

    def _reads_at_call(
        self, p: Prepared
    ) -> tuple[list[Condition], list[Condition], list[str], Successor | None]:
        """What the tool's activity reads around the call (``ToolCall.check`` and ``after``):
        the pre conditions before; the post conditions after, with the next step's first read
        when it can be fused (as in ``_successor_read``; known before the call unless this step
        binds values from its result)."""
        if not self.ctx.reads_in_call:
            return [], [], [], None
        if not p.post:
            return p.pre, [], [], None
        successor = None if self.step.binds else self._successor_read(None)
        if successor is None:
            return p.pre, p.post, [], None
        _, first, lenient = successor
        return p.pre, [*p.post, *first], lenient, successor

    def _read_after_call(
        self,
        p: Prepared,
        asked: list[Condition],
        report: ProbeReport | None,
        successor: Successor | None,
    ) -> ProbeReport | None:
        """The read made in the tool's activity right after the call: the post check's first
        read (recorded as such), its verdict the same as the workflow's own read would get.
        When every post condition held, the next step's part is kept for it, if nothing else
        has begun since. None when there is no usable read (none was made, it is not an
        answer to what was asked, or a probe could not answer): the workflow reads itself."""
        if report is None or [r.condition.key() for r in report.results] != [
            c.key() for c in asked
        ]:
            return None  # never a pass
        mine = report.model_copy(update={"results": report.results[: len(p.post)]})
        bookkeeping.record_check(self.ctx.report, self.rep, Phase.POST, self.attempt, mine)
        if mine.unknown:
            return None
        alone = self._alone()  # still so after the call: the read is the next step's too
        if mine.all_hold and successor is not None and alone and alone.n == successor[0]:
            m, first, _ = successor
            theirs = report.model_copy(
                update={"results": report.results[len(p.post) :], "elapsed_ms": 0.0}
            )
            self.ctx.prefetched[m] = ([c.key() for c in first], theirs)
        return mine

    def _record_at_call(self, data: JsonValue) -> ProbeReport | None:
        """The read that refused a call at its door, kept in the report as a check."""
        try:
            read = ProbeReport.model_validate(data)
        except ValidationError:
            return None
        bookkeeping.record_check(self.ctx.report, self.rep, Phase.AT_CALL, self.attempt, read)
        return read

    def _read_at_call_only(self, refused: ProbeReport) -> bool:
        """Whether every condition that refused the call was read there for the first time."""
        failed = {r.condition.key() for r in refused.results if r.outcome is not Outcome.HOLDS}
        return bool(failed) and failed <= self.read_at_call_only

    async def _verify(
        self,
        p: Prepared,
        refs: dict[str, JsonValue] | None,
        successor: Successor | None = None,
        *,
        output: dict[str, JsonValue] | None = None,
        read_back: bool = False,
        resume: Parked | None = None,
        first: ProbeReport | None = None,
    ) -> Failed | Unknown | None:
        """Every post condition on a fresh read; with ``wait``, read again until its deadline.
        ``successor``: the next step's first read, fused into the first of these reads.
        ``output`` and ``read_back``: what a wait parked here carries into the next run;
        ``resume``: such a wait, going on. ``first``: the first read, made (and recorded) in
        the tool's activity right after the call."""
        if not p.post:
            return None
        if successor is not None:
            fused = await self._fused_post(p, refs, successor)
            if fused is not None:
                return None
        waits = [c.wait for c in p.post if c.wait is not None]
        timeout = timedelta(seconds=max((w.timeout_s for w in waits), default=0))
        interval = timedelta(seconds=min((w.interval_s for w in waits), default=60))
        deadline = workflow.now() + timeout
        reads = 0
        if resume is not None:
            deadline, reads = resume.deadline or deadline, resume.reads
        parked = self._parked(
            ParkedAt.POST_WAIT,
            args=p.args,
            refs=refs,
            output=output,
            deadline=deadline,
            read_back=read_back,
        )
        if resume is not None:
            if resume.resume_at is not None:
                await self._pause(resume.resume_at, parked.model_copy(update={"reads": reads}))
            self.ctx.set_state(self.step.n, StepState.VERIFYING, fold=reads >= 2)
        while True:
            # a wait's third and later reads are folded into one record (the report stays small)
            answer: ProbeReport | Failed | Unknown
            if first is not None:
                answer, first = first, None
            else:
                answer = await self._probe(Phase.POST, p, p.post, refs, fold=reads >= 2)
            reads += 1
            if isinstance(answer, Failed | Unknown):
                return answer
            failed = [r for r in answer.results if r.outcome is not Outcome.HOLDS]
            if not failed:
                return None
            in_time = bool(waits) and _next_read_in_time(
                reads, interval, timeout, deadline, self.ctx.recent
            )
            d = route(self._situation(Kind.POST_VIOLATED, waits=in_time))
            if d.answer is not Answer.WAIT:
                unmet = failed[0]
                return Failed(
                    d,
                    self._failure(
                        "postcondition_unmet", False, f"{unmet.condition.key()}: {unmet.detail}",
                        attribution=Attribution.NOT_ESTABLISHED,
                    ),
                )
            self._decide(d, again=reads > 1)  # a wait is one answer, however many reads
            self.ctx.set_state(self.step.n, StepState.WAITING, fold=reads >= 2)
            due = workflow.now() + interval
            await self._pause(due, parked.model_copy(update={"reads": reads}))
            self.ctx.set_state(self.step.n, StepState.VERIFYING, fold=reads >= 2)

    async def _fused_post(
        self,
        p: Prepared,
        refs: dict[str, JsonValue] | None,
        successor: Successor,
    ) -> ProbeReport | None:
        """This step's post check and the next step's first read in one call. When every post
        condition holds, the next step's part is kept for it; otherwise (or when the call
        fails) None, and the post check is made on its own."""
        m, first, lenient = successor
        req = ProbeRequest(
            step=p.ref, conditions=[*p.post, *first], idempotency_key=p.key, output=refs,
            lenient=lenient,
        )
        summary = None
        if self.ctx.recent:
            summary = summaries.fused(self.step.n, m, self.ctx.version, req.conditions)
        answer = await calls.probe(req, summary, local=self.ctx.recent)
        if not isinstance(answer, calls.Probed):
            return None
        mine = answer.report.model_copy(update={"results": answer.report.results[: len(p.post)]})
        if any(r.outcome is not Outcome.HOLDS for r in mine.results):
            return None
        bookkeeping.record_check(self.ctx.report, self.rep, Phase.POST, self.attempt, mine)
        theirs = answer.report.model_copy(
            update={"results": answer.report.results[len(p.post) :], "elapsed_ms": 0.0}
        )
        self.ctx.prefetched[m] = ([c.key() for c in first], theirs)
        return mine

    async def _read_back(self, p: Prepared, unknown: Unknown) -> Finished | Failed:
        """A money or external call whose outcome is unknown: read the world by idempotency key
        before anything else. Found: the call acted, and its post conditions judge it. Certainly
        absent: it did not act, so it may be tried again with the same key. Still unknown: halt.
        Never a new key while the first call's effect may exist."""
        self.rep.reason = f"{unknown.failure.detail}: reading the world by idempotency key"
        answer = await self._probe(Phase.READ_BACK, p, [Condition(probe="effect_recorded")], None)
        if isinstance(answer, Failed | Unknown):
            return self._halt_unknown(unknown, answer.failure.detail)
        found = answer.results[0]
        if found.outcome is not Outcome.HOLDS:
            # Nothing was done under this key: the failure is what the tool said it was.
            detail = f"{unknown.failure.detail}; nothing was recorded under its idempotency key"
            return Failed(unknown.if_absent, unknown.failure.model_copy(update={"detail": detail}))
        output = found.observed if isinstance(found.observed, dict) else {}
        bookkeeping.record_result(self.ctx.report, self.rep, output)
        self.ctx.set_state(self.step.n, StepState.VERIFYING)
        match await self._verify(p, None, output=output, read_back=True):
            case Unknown(failure=again):
                return self._halt_unknown(unknown, again.detail)
            case Failed() as failed:
                return failed
        return Finished(StepState.DONE, p.args, output)

    async def _resume_wait(self, base: Prepared, parked: Parked) -> Attempt:
        """A post wait an earlier run of the chain parked: the call acted (with ``args``), and
        its post conditions are read again on their schedule, up to the same deadline."""
        args = parked.args if parked.args is not None else base.args
        p = replace(base, args=args, ref=self._ref(args))
        verified = await self._verify(
            p, parked.refs, output=parked.output, read_back=parked.read_back, resume=parked
        )
        match verified:
            case Unknown() if parked.read_back:  # as in ``_read_back``
                return self._halt_unknown(verified, verified.failure.detail)
            case Unknown() if self.effect.outcome_must_be_known:  # as in ``_attempt``
                return await self._read_back(p, verified)
        return verified or Finished(StepState.DONE, p.args, parked.output)

    async def _read_after_cancel(self, p: Prepared) -> None:
        """After a cancel reached a call in flight: did it act? Its post conditions (or, for
        money and external, its record by idempotency key) say done, not done, or unknown."""
        outcome, why = CancelOutcome.UNKNOWN, "no post condition to read"
        conds = p.post or (
            [Condition(probe="effect_recorded")] if self.guard.reads_by_key else []
        )
        if conds:
            answer = await self._probe(Phase.AFTER_CANCEL, p, conds, None)
            if isinstance(answer, Failed | Unknown):
                why = answer.failure.detail
            elif all(r.outcome is Outcome.HOLDS for r in answer.results):
                outcome, why = CancelOutcome.DONE, "its post conditions hold"
            else:
                first = next(r for r in answer.results if r.outcome is not Outcome.HOLDS)
                outcome, why = CancelOutcome.NOT_DONE, f"{first.condition.key()}: {first.detail}"
        self.rep.cancel_outcome = outcome
        self.rep.reason = f"cancelled while the call was in flight: {outcome} ({why})"

    def _halt_unknown(self, unknown: Unknown, why: str) -> Failed:
        d = route(self._situation(Kind.OUTCOME_UNKNOWN))
        detail = f"{unknown.failure.detail}; the world could not tell: {why}"
        f = unknown.failure.model_copy(
            update={"code": "outcome_unknown", "retryable": False, "detail": detail}
        )
        return Failed(d, f)

    # -- probes -----------------------------------------------------------------------------------
    async def _probe(
        self,
        phase: Phase,
        p: Prepared,
        conds: list[Condition],
        refs: dict[str, JsonValue] | None,
        lenient: list[str] | None = None,
        fold: bool = False,
    ) -> ProbeReport | Failed | Unknown:
        """Read ``conds``. A system that does not answer at all is waited for, read again and
        again (``options.outage_backoff``), up to the run's outage patience; then the step
        halts: a new plan would meet the same outage, so none is asked for. Not after a cancel:
        whoever cancelled is not kept waiting."""
        req = ProbeRequest(
            step=p.ref, conditions=conds, idempotency_key=p.key, output=refs,
            lenient=lenient or [],
        )
        summary = None
        if self.ctx.recent:
            summary = summaries.probe(phase, self.step.n, self.ctx.version, conds)
        began, outage_reads = workflow.now(), 0
        while True:
            answer = await calls.probe(req, summary, local=self.ctx.recent)
            record = fold or outage_reads >= 2
            if isinstance(answer, calls.Probed):
                bookkeeping.record_check(
                    self.ctx.report, self.rep, phase, self.attempt, answer.report, record
                )
                return answer.report
            if answer.report is not None:
                bookkeeping.record_check(
                    self.ctx.report, self.rep, phase, self.attempt, answer.report, record
                )
            if answer.code != "system_unavailable" or phase is Phase.AFTER_CANCEL:
                break
            waited = workflow.now() - began
            if waited >= self.ctx.outage_patience:
                d = route(self._situation(Kind.SYSTEM_DOWN))
                why = f"{answer.detail} (no answer for {waited.total_seconds():.0f}s)"
                failure = self._failure("system_unavailable", True, why, status=503)
                return Unknown(d, failure, d) if phase is Phase.POST else Failed(d, failure)
            outage_reads += 1
            await self._wait_for_system(answer, outage_reads, self.ctx.outage_patience - waited)
        if answer.code == "bad_arguments":  # bound values that do not fit: permanent
            d = route(self._situation(Kind.TOOL_ERROR, status=400))
            return Failed(d, self._failure("bad_arguments", False, answer.detail, status=400))
        d = route(self._situation(Kind.PROBE_UNKNOWN))
        failure = self._failure("probe_unknown", True, answer.detail, status=503)
        if phase is Phase.POST:  # the call ran: whether it acted, nobody can tell now
            return Unknown(d, failure, d)
        return Failed(d, failure)

    async def _wait_for_system(
        self, answer: calls.ProbeFailed, reads: int, left: timedelta
    ) -> None:
        """WAITING while the systems a read needs are down; then the state it was in."""
        report = answer.report
        down = sorted({
            self.ctx.guarded.systems.get(r.condition.probe, "record")
            for r in (report.unknown if report else [])
        })
        was = self.rep.state
        self._decide(route(self._situation(Kind.SYSTEM_DOWN, waits=True)), again=reads > 1)
        self.rep.reason = (
            f"{', '.join(down) or 'a system'} did not answer: waiting for it "
            f"({reads} read(s) so far, {left.total_seconds():.0f}s of patience left)"
        )
        self.ctx.set_state(self.step.n, StepState.WAITING, fold=reads >= 2)
        await workflow.sleep(min(options.outage_backoff(reads), left))
        self.ctx.set_state(self.step.n, was, fold=reads >= 2)

    # -- the end of a step ----------------------------------------------------------------------
    def _complete(self, done: Finished) -> StepOutcome | Failed:
        """Bind what the step's result names, record it as completed."""
        binds: dict[str, JsonValue] = {}
        for name, path in self.step.binds.items():
            try:
                value = jsonpath.get(done.output or {}, path)
            except jsonpath.PathError as e:
                d = route(self._situation(Kind.TOOL_ERROR, status=400))
                return Failed(d, self._failure("binding_missing", False, f"{name}: {e}"))
            size = len(json.dumps(value))
            if size > limits.MAX_ARG_JSON_BYTES:
                d = route(self._situation(Kind.TOOL_ERROR, status=400))
                why = f"{name}: {size:,} bytes, more than an argument may hold"
                return Failed(d, self._failure("binding_missing", False, why))
            binds[name] = value
        self.rep.binds = binds
        self.ctx.bound.update(binds)
        for c in self.ctx.promised_post(self.step):
            self.ctx.verified[c.key()] = self.step.n
        self.ctx.set_state(self.step.n, done.state)
        # the plan's arguments, resolved (not the version plangate added to the call): what
        # a re-plan compares its steps with
        args = {k: v for k, v in done.args.items() if k in self.step.args}
        self.ctx.report.completed.append(
            CompletedStep(
                n=self.step.n, tool=self.step.tool, plan_version=self.ctx.version,
                state=done.state, effect=self.effect, args=args, binds=binds,
            )
        )
        return StepOutcome(self.step.n, done.state)

    def _fail(self, decision: Decision, failure: FailureRecord) -> StepOutcome:
        if decision.answer is Answer.RETRY:  # retries spent: recovery follows on_unmet
            decision = route(Situation(Kind.TOOL_ERROR, self.effect, self.step.on_unmet))
        self._decide(decision)
        failure.answer = decision.answer
        state = StepState.HALTED if decision.answer is Answer.HALT else StepState.REPLANNING
        self.ctx.set_state(self.step.n, state)
        return StepOutcome(self.step.n, state, failure)

    def _decide(self, d: Decision, again: bool = False) -> None:
        """``again``: the answer the step already has, to a later read of the same wait (the
        report shows it once; so does the metric)."""
        self.rep.answer = d.answer
        self.rep.reason = d.reason
        if not again:
            metrics.answer(d.answer.value, self.step.tool)

    def _situation(self, kind: Kind, **kw: object) -> Situation:
        return Situation(
            kind=kind,
            effect=self.effect,
            on_unmet=self.step.on_unmet,
            retries_left=self.attempt < options.STEP_ATTEMPTS,
            **kw,  # type: ignore[arg-type]
        )

    def _failure(self, code: str, retryable: bool, detail: str, **kw: object) -> FailureRecord:
        return FailureRecord(
            step=self.step.n, tool=self.step.tool, plan_version=self.ctx.version, code=code,
            retryable=retryable, detail=detail, **kw,
        )
