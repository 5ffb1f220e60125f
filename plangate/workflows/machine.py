"""The lifecycle of one step: PROBING -> EXECUTING -> VERIFYING -> DONE, and the answers to a
failed check. EXECUTING is reachable only from a PROBING that passed in the same attempt; DONE
only from a VERIFYING whose every post condition held on a fresh read.

The machine runs the stages (``probing``, ``approval``, ``dispatch``, ``verification``) and
decides by ``match`` on the value each returns (``step``): finished, failed, unknown, owed by a
concurrent step, or parked for the run to continue as new. Workflow-level retries of the whole
step are here; the activity calls and their failures are ``calls``, the report ``bookkeeping``.
"""

from __future__ import annotations

import json
from datetime import datetime

from pydantic import JsonValue
from temporalio import workflow

from plangate.plans import jsonpath, limits
from plangate.plans.model import Step
from plangate.records import options
from plangate.records.report import Answer, CompletedStep, FailureRecord, StepState
from plangate.records.run import Parked, ParkedAt
from plangate.workflows import approval, deciding, dispatch, probing, summaries, verification
from plangate.workflows.context import VersionContext
from plangate.workflows.router import Kind, Route, Situation, route
from plangate.workflows.step import (
    Attempt,
    Failed,
    Finished,
    Held,
    Owed,
    Park,
    Prepared,
    StepOutcome,
    StepScope,
    Unknown,
)

__all__ = ["StepOutcome", "StepRunner"]



def _outage(attempt: Attempt) -> bool:
    """A tool call that sent nothing because a system it needs did not answer, answered WAIT
    (``dispatch.execute``: a run of ``VersionContext.kept``)."""
    return isinstance(attempt, Failed) and attempt.decision.answer is Answer.WAIT \
        and attempt.failure.code == "system_unavailable"


class StepRunner:
    """One step, run to an end or to a safe point (``resume``: where an earlier run of the
    chain parked it)."""

    def __init__(self, ctx: VersionContext, step: Step, resume: Parked | None = None) -> None:
        self.s = StepScope(ctx, step)
        self.resume = resume
        self.outage_began: datetime | None = None  # a tool's system away since (``OUTAGE``)
        self.outage_reads = 0

    async def run(self) -> StepOutcome:
        s = self.s
        resume, self.resume = self.resume, None
        if resume is not None:
            s.attempt = resume.attempt
            if resume.at is ParkedAt.START:
                if resume.resume_at is not None:
                    delay = resume.resume_at - workflow.now()
                    summary = summaries.resume(s.n, s.ctx.version, delay)
                    park = await s.pause(resume.resume_at, resume, summary)
                    if park is not None:
                        return self._parked(park)
                resume = None
        while True:
            if resume is None:
                if s.ctx.over_bound():
                    return self._parked(Park(s.parked(ParkedAt.START)))
                s.attempt += 1
            attempt = await self._attempt(resume)
            resume = None
            if not _outage(attempt):
                self.outage_began = None  # the systems answered: a later outage waits anew
            match attempt:
                case Park() as park:
                    return self._parked(park)
                case Finished() as done:
                    match self._complete(done):
                        case Failed(decision=d, failure=f):
                            return self._fail(d, f)
                        case StepOutcome() as outcome:
                            return outcome
                case Owed() as owed:
                    s.attempt -= 1  # waiting for a concurrent step is not an attempt
                    match await probing.wait_for_owner(s, owed):
                        case Failed(decision=d, failure=f):
                            return self._fail(d, f)
                        case Park() as park:
                            return self._parked(park)
                case Failed(failure=f) if _outage(attempt) and self._outage_waits():
                    # the tool sent nothing: a system it needs (Postgres for the effect
                    # ledger, the seal's key) did not answer. Waited out as a probe's outage
                    # is, for the run's patience: not an attempt of the step's.
                    s.attempt -= 1
                    park = await self._wait_out(f.detail)
                    if park is not None:
                        return self._parked(park)
                case Failed(failure=f) if _outage(attempt):
                    waited = (workflow.now() - (self.outage_began or workflow.now()))
                    f.detail = f"{f.detail} (no answer for {waited.total_seconds():.0f}s)"[:500]
                    return self._fail(route(s.situation(Kind.SYSTEM_DOWN)), f)
                case Failed(decision=d) | Unknown(decision=d) if (
                    d.answer is Answer.RETRY and s.attempt < options.STEP_ATTEMPTS
                ):
                    s.decide(d)
                    delay = options.step_backoff(s.attempt)
                    summary = summaries.retry(s.n, s.ctx.version, delay, s.attempt)
                    park = await s.pause(workflow.now() + delay, s.parked(ParkedAt.START), summary)
                    if park is not None:
                        return self._parked(park)
                case Failed(decision=d, failure=f) | Unknown(decision=d, failure=f):
                    return self._fail(d, f)

    def _outage_waits(self) -> bool:
        """The step waits for a system its tool could not reach, while the run's outage
        patience lasts (from the first such answer); past it, it halts."""
        now = workflow.now()
        if self.outage_began is None:
            self.outage_began, self.outage_reads = now, 0
        return now - self.outage_began < self.s.ctx.outage_patience

    async def _wait_out(self, detail: str) -> Park | None:
        s = self.s
        assert self.outage_began is not None
        self.outage_reads += 1
        left = s.ctx.outage_patience - (workflow.now() - self.outage_began)
        delay = min(options.outage_backoff(self.outage_reads), left)
        s.decide(route(s.situation(Kind.SYSTEM_DOWN, waits=True)), again=self.outage_reads > 1)
        s.rep.reason = (f"the tool could not act, a system did not answer: waiting for it "
                        f"({self.outage_reads} time(s) so far, {left.total_seconds():.0f}s of "
                        f"patience left): {detail}"[:500])
        s.set_state(StepState.WAITING, fold=self.outage_reads >= 2)
        summary = summaries.retry(s.n, s.ctx.version, delay, s.attempt + 1)
        return await s.pause(workflow.now() + delay, s.parked(ParkedAt.START), summary)

    async def _attempt(self, resume: Parked | None = None) -> Attempt:
        s = self.s
        prepared = s.prepare()
        if isinstance(prepared, Failed):
            return prepared
        if resume is not None and resume.at is ParkedAt.POST_WAIT:
            return await verification.resume_wait(s, prepared, resume)
        if resume is not None:  # APPROVAL: its card is still waiting for a person
            match await approval.approve(s, prepared, None, resume):
                case Prepared() as approved:
                    p = approved
                case stopped:
                    return stopped
        else:
            match await probing.check_before(s, prepared):
                case Held() as checked:
                    p = s.carry_version(prepared, checked)
                case stopped:
                    return stopped
            if deciding.waits_on_binding(s):
                refused = await deciding.decide_bound(s, prepared)
                if refused is not None:
                    return refused
            if s.guard.approval:
                match await approval.approve(s, prepared, checked):
                    case Prepared() as approved:
                        p = approved
                    case stopped:
                        return stopped
        match await dispatch.execute(s, prepared, p):
            case Unknown() as unknown if s.effect.outcome_must_be_known:
                return await verification.read_back(s, p, unknown)
            case acted:
                return acted

    def _parked(self, park: Park) -> StepOutcome:
        n = self.s.n
        return StepOutcome(n, self.s.ctx.state(n), parked=park.parked)

    def _complete(self, done: Finished) -> StepOutcome | Failed:
        """Bind what the step's result names, record it as completed."""
        s, ctx = self.s, self.s.ctx
        binds: dict[str, JsonValue] = {}
        for name, path in s.step.binds.items():
            try:
                value = jsonpath.get(done.output or {}, path)
            except jsonpath.PathError as e:
                d = route(s.situation(Kind.TOOL_ERROR))
                return Failed(d, s.failure("binding_missing", False, f"{name}: {e}"))
            size = len(json.dumps(value))
            if size > limits.MAX_ARG_JSON_BYTES:
                d = route(s.situation(Kind.TOOL_ERROR))
                why = f"{name}: {size:,} bytes, more than an argument may hold"
                return Failed(d, s.failure("binding_missing", False, why))
            binds[name] = value
        s.rep.binds = binds
        ctx.bound.update(binds)
        for c in ctx.promised_post(s.step):
            ctx.verified[c.key()] = s.n
        s.set_state(done.state)
        # the plan's arguments, resolved (not the version plangate added to the call): what a
        # re-plan compares its steps with
        args = {k: v for k, v in done.args.items() if k in s.step.args}
        ctx.report.completed.append(
            CompletedStep(
                n=s.n, tool=s.step.tool, plan_version=ctx.version, state=done.state,
                effect=s.effect, args=args, binds=binds,
            )
        )
        return StepOutcome(s.n, done.state)

    def _fail(self, decision: Route, failure: FailureRecord) -> StepOutcome:
        s = self.s
        if decision.answer is Answer.RETRY:  # retries spent: recovery follows on_unmet
            decision = route(Situation(Kind.TOOL_ERROR, s.effect, s.step.on_unmet))
        s.decide(decision)
        failure.answer = decision.answer
        state = StepState.HALTED if decision.answer is Answer.HALT else StepState.REPLANNING
        s.set_state(state)
        return StepOutcome(s.n, state, failure)
