"""The lifecycle of one step: PROBING -> EXECUTING -> VERIFYING -> DONE, and the answers to a
failed check. EXECUTING is reachable only from a PROBING that passed in the same attempt; DONE
only from a VERIFYING whose every post condition held on a fresh read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from pydantic import JsonValue
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from activities.tools.registry import conditions_for, effective_effect, skip_evidence
    from plans import bindings, jsonpath
    from plans.model import Condition, Step
    from records.calls import (
        Outcome,
        ProbeReport,
        ProbeRequest,
        ProbeResult,
        StepRef,
        ToolCall,
        ToolFailure,
        ToolResult,
    )
    from records.report import CheckRecord, CompletedStep, FailureRecord, StepState
    from workflows import options
    from workflows.context import VersionContext
    from workflows.router import Answer, Decision, Kind, Situation, route


@dataclass(frozen=True)
class StepOutcome:
    n: int
    state: StepState  # DONE, SKIPPED, or the state of a final failure
    failure: FailureRecord | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


class _Final(Exception):
    def __init__(self, decision: Decision, failure: FailureRecord) -> None:
        self.decision = decision
        self.failure = failure


class _OutcomeUnknown(_Final):
    """The call may have acted and nobody can say: for a money or external step, the world is
    read by idempotency key before anything else (``if_absent`` is the answer when it did not
    act)."""

    def __init__(self, decision: Decision, failure: FailureRecord, if_absent: Decision) -> None:
        super().__init__(decision, failure)
        self.if_absent = if_absent


class StepRunner:
    def __init__(self, ctx: VersionContext, step: Step) -> None:
        self.ctx = ctx
        self.step = step
        self.effect = effective_effect(step)
        self.rep = ctx.step_report(step.n)
        self.attempt = 0

    # -- the whole step, with workflow-level retries ------------------------------------------
    async def run(self) -> StepOutcome:
        while True:
            try:
                return await self._attempt()
            except _WaitOwner as w:
                outcome = await self._wait_for(w)
                if outcome is not None:
                    return outcome
                self.attempt -= 1  # waiting for a concurrent step is not an attempt
            except _Final as f:
                if f.decision.answer is Answer.RETRY and self.attempt < options.STEP_ATTEMPTS:
                    self._decide(f.decision)
                    await workflow.sleep(options.step_backoff(self.attempt))
                    continue
                return self._fail(f.decision, f.failure)

    async def _wait_for(self, w: _WaitOwner) -> StepOutcome | None:
        """Wait for the owner of a missing state to finish; then the step probes again."""
        self._decide(w.decision)
        self.ctx.set_state(self.step.n, StepState.WAITING)
        limit = w.cond.wait.timeout_s if w.cond.wait else options.DEFAULT_WAIT.total_seconds()
        try:
            await workflow.wait_condition(
                lambda: self.ctx.state(w.owner).final, timeout=timedelta(seconds=limit)
            )
        except TimeoutError:
            d = route(self._situation(Kind.PRE_VIOLATED))
            detail = f"{w.cond.key()}: step {w.owner} did not establish it within {limit:.0f}s"
            return self._fail(d, self._failure("wait_expired", False, detail))
        return None

    def _fail(self, decision: Decision, failure: FailureRecord) -> StepOutcome:
        answer = decision.answer
        if answer is Answer.RETRY:  # retries spent: the step fails, recovery follows on_unmet
            decision = route(Situation(Kind.TOOL_ERROR, self.effect, self.step.on_unmet))
            answer = decision.answer
        self._decide(decision)
        failure.answer = answer.value
        state = StepState.HALTED if answer is Answer.HALT else StepState.REPLANNING
        self.ctx.set_state(self.step.n, state)
        return StepOutcome(self.step.n, state, failure)

    def _decide(self, d: Decision) -> None:
        self.rep.answer = d.answer.value
        self.rep.reason = d.reason

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
            step=self.step.n,
            tool=self.step.tool,
            plan_version=self.ctx.version,
            code=code,
            retryable=retryable,
            detail=detail,
            **kw,
        )

    # -- one attempt ----------------------------------------------------------------------------
    async def _attempt(self) -> StepOutcome:
        self.attempt += 1
        n = self.step.n
        try:
            args = bindings.resolve(self.step.args, self.ctx.bound, "args")
            pre = conditions_for(
                self.step, "pre", args, self.ctx.resolve_conditions(self.step.pre, "pre")
            )
            post = conditions_for(
                self.step, "post", args, self.ctx.resolve_conditions(self.step.post, "post")
            )
        except bindings.BindingError as e:
            d = self._situation(Kind.TOOL_ERROR, status=400)
            failure = self._failure("unbound_reference", False, str(e), status=400)
            raise _Final(route(d), failure) from e
        ref = StepRef(
            run_id=self.ctx.run_id, plan_version=self.ctx.version, n=n, tool=self.step.tool,
            args=args,
        )
        key = self.ctx.idempotency_key(n)

        self.ctx.set_state(n, StepState.PROBING)
        done = self._skip_check(args, post)
        first = done + pre
        if first:
            # evidence only read to skip: arguments that do not fit it mean "no evidence"
            only = [c.key() for c in done[len(post) :]] if done else []
            phase = "skip+pre" if done else "pre"
            report = await self._probe(phase, ref, first, key, None, lenient=only)
            self.rep.timings.precheck_read_at = report.read_at
            if done and all(r.outcome is Outcome.HOLDS for r in report.results[: len(done)]):
                self._decide(route(self._situation(Kind.ALREADY_DONE)))
                return self._finish(StepState.SKIPPED, args, None)
            self._judge_pre(report.results[len(done) :])

        self.ctx.set_state(n, StepState.EXECUTING)
        try:
            result = await self._call(ref, key)
            output: dict[str, JsonValue] | None = result.output
            self.ctx.record_result(self.rep, result.output)
            self.ctx.set_state(n, StepState.VERIFYING)
            if post:
                await self._verify(ref, post, key, result.refs)
        except _OutcomeUnknown as u:
            if not self.effect.outcome_must_be_known:
                raise
            output = await self._read_back(ref, post, key, u)
        return self._finish(StepState.DONE, args, output)

    def _skip_check(self, args: dict[str, JsonValue], post: list[Condition]) -> list[Condition]:
        """What must hold before the call for the step to be skipped as already done: every post
        condition and the tool's evidence that *this* call's effect is in place. Nothing when
        the step cannot be skipped (a read, a step that binds values, no such evidence)."""
        if self.effect.rank == 0 or self.step.binds:
            return []
        if not workflow.patched("earned-skips"):
            return post  # runs started before skips had to be earned
        evidence = skip_evidence(self.step.tool, args)
        if not evidence:
            return []
        keys = {c.key() for c in post}
        return post + [c for c in evidence if c.key() not in keys]

    async def _read_back(
        self, ref: StepRef, post: list[Condition], key: str, unknown: _OutcomeUnknown
    ) -> dict[str, JsonValue]:
        """A money or external call whose outcome is unknown: read the world by idempotency key
        before anything else. Found: the call acted, and its post conditions judge it. Certainly
        absent: it did not act, so it may be tried again with the same key. Still unknown: halt.
        Never a new key while the first call's effect may exist."""
        self.rep.reason = f"{unknown.failure.detail}: reading the world by idempotency key"
        cond = Condition(probe="effect_recorded")
        try:
            report = await self._probe("read-back", ref, [cond], key, None)
        except _Final as f:
            raise self._halt_unknown(unknown, f.failure.detail) from None
        found = report.results[0]
        if found.outcome is not Outcome.HOLDS:
            # Nothing was done under this key: the failure is what the tool said it was.
            raise _Final(unknown.if_absent, unknown.failure)
        output = found.observed if isinstance(found.observed, dict) else {}
        self.ctx.record_result(self.rep, output)
        self.ctx.set_state(self.step.n, StepState.VERIFYING)
        if post:
            try:
                await self._verify(ref, post, key, None)
            except _OutcomeUnknown as again:
                raise self._halt_unknown(unknown, again.failure.detail) from None
        return output

    def _halt_unknown(self, unknown: _OutcomeUnknown, why: str) -> _Final:
        d = route(self._situation(Kind.OUTCOME_UNKNOWN))
        f = unknown.failure.model_copy(
            update={
                "code": "outcome_unknown",
                "retryable": False,
                "detail": f"{unknown.failure.detail}; the world could not tell: {why}",
            }
        )
        return _Final(d, f)

    def _finish(
        self, state: StepState, args: dict[str, JsonValue], output: dict[str, JsonValue] | None
    ) -> StepOutcome:
        binds: dict[str, JsonValue] = {}
        if output is not None:
            for name, path in self.step.binds.items():
                try:
                    binds[name] = jsonpath.get(output, path)
                except jsonpath.PathError as e:
                    d = route(self._situation(Kind.TOOL_ERROR, status=400))
                    raise _Final(d, self._failure("binding_missing", False, f"{name}: {e}")) from e
        self.rep.binds = binds
        self.ctx.bound.update(binds)
        for c in self.ctx.promised_post(self.step):
            self.ctx.verified[c.key()] = self.step.n
        self.ctx.set_state(self.step.n, state)
        self.ctx.report.completed.append(
            CompletedStep(
                n=self.step.n, tool=self.step.tool, plan_version=self.ctx.version, state=state,
                effect=self.effect.value, args=args, binds=binds,
            )
        )
        return StepOutcome(self.step.n, state)

    # -- probes -----------------------------------------------------------------------------------
    async def _probe(
        self,
        phase: str,
        ref: StepRef,
        conds: list[Condition],
        key: str,
        output: dict[str, JsonValue] | None,
        lenient: list[str] | None = None,
    ) -> ProbeReport:
        req = ProbeRequest(
            step=ref, conditions=conds, idempotency_key=key, output=output, lenient=lenient or []
        )
        try:
            report: ProbeReport = await workflow.execute_activity(
                "probe.evaluate",
                req,
                result_type=ProbeReport,
                start_to_close_timeout=options.PROBE.start_to_close_timeout,
                retry_policy=options.PROBE.retry_policy,
            )
        except ActivityError as e:
            detail = str(e.cause) if e.cause else str(e)
            if isinstance(e.cause, ApplicationError) and e.cause.details:
                failed = ProbeReport.model_validate(e.cause.details[0])
                self._record(phase, failed)
                detail = "; ".join(f"{r.condition.key()}: {r.detail}" for r in failed.unknown)
                if e.cause.type == "bad_arguments":  # bound values that do not fit: permanent
                    d = route(self._situation(Kind.TOOL_ERROR, status=400))
                    failure = self._failure("bad_arguments", False, detail, status=400)
                    raise _Final(d, failure) from e
            d = route(self._situation(Kind.PROBE_UNKNOWN))
            failure = self._failure("probe_unknown", True, detail, status=503)
            if phase == "post":  # the call ran: whether it acted is what nobody can tell now
                raise _OutcomeUnknown(d, failure, d) from e
            raise _Final(d, failure) from e
        asked = [c.key() for c in conds]
        if workflow.patched("probe-answers-checked") and [
            r.condition.key() for r in report.results
        ] != asked:
            # An answer that is not about the conditions asked is no answer: never a pass.
            d = route(self._situation(Kind.PROBE_UNKNOWN))
            detail = "the probe report does not answer the conditions asked"
            raise _Final(d, self._failure("probe_unknown", True, detail, status=503))
        self._record(phase, report)
        return report

    def _record(self, phase: str, report: ProbeReport) -> None:
        self.rep.checks.append(
            CheckRecord(
                phase=phase, attempt=self.attempt, results=report.results,
                read_at=report.read_at, elapsed_ms=report.elapsed_ms,
            )
        )
        m = self.ctx.report.metrics
        m.probe_ms += report.elapsed_ms
        m.probes_run += len(report.results)

    def _judge_pre(self, results: list[ProbeResult]) -> None:
        failed = [r for r in results if r.outcome is not Outcome.HOLDS]
        if not failed:
            return
        first = failed[0]
        owner = self.ctx.unfinished_owner(first.condition, self.step.n)
        d = route(self._situation(Kind.PRE_VIOLATED, owed_by_unfinished_step=owner is not None))
        if d.answer is Answer.WAIT and owner is not None:
            raise _WaitOwner(d, owner, first.condition)
        by = self.ctx.verified.get(first.condition.key())
        raise _Final(
            d,
            self._failure(
                "precondition_unmet", False, f"{first.condition.key()}: {first.detail}",
                attribution="destroyed" if by is not None else None, established_by=by,
            ),
        )

    # -- the call ---------------------------------------------------------------------------------
    async def _call(self, ref: StepRef, key: str) -> ToolResult:
        opts = options.tool_options(self.effect)
        try:
            result: ToolResult = await workflow.execute_activity(
                self.step.tool,
                ToolCall(step=ref, idempotency_key=key),
                result_type=ToolResult,
                start_to_close_timeout=opts.start_to_close_timeout,
                heartbeat_timeout=opts.heartbeat_timeout,
                retry_policy=opts.retry_policy,
            )
        except ActivityError as e:
            cause = e.cause
            if isinstance(cause, ApplicationError) and cause.details:
                tf = ToolFailure.model_validate(cause.details[0])
                self.rep.attempts += tf.attempt
                d = route(
                    self._situation(Kind.TOOL_ERROR, status=tf.status, retryable=tf.retryable)
                )
                failure = self._failure(tf.code, tf.retryable, tf.detail, status=tf.status)
                if tf.may_have_acted:
                    raise _OutcomeUnknown(d, failure, d) from e
                raise _Final(d, failure) from e
            kind = "timed out" if isinstance(cause, ActivityTimeout) else "failed without an answer"
            d = route(self._situation(Kind.OUTCOME_UNKNOWN))
            failure = self._failure("outcome_unknown", False, f"the call {kind}")
            # Certainly not done: the failure is a transient one, retried with the same key.
            absent = route(self._situation(Kind.TOOL_ERROR, status=503, retryable=True))
            raise _OutcomeUnknown(d, failure, absent) from e
        self.rep.attempts += result.attempt
        t = self.rep.timings
        t.tool_started_at, t.tool_finished_at = result.started_at, result.finished_at
        self.rep.check_to_use_ms = t.check_to_use_ms
        self.rep.staleness_ms = t.staleness_ms
        m = self.ctx.report.metrics
        if t.check_to_use_ms is not None:
            m.check_to_use_ms_max = max(m.check_to_use_ms_max or 0.0, t.check_to_use_ms)
        if t.staleness_ms is not None:
            m.staleness_ms_max = max(m.staleness_ms_max or 0.0, t.staleness_ms)
        return result

    # -- verification -----------------------------------------------------------------------------
    async def _verify(
        self, ref: StepRef, post: list[Condition], key: str, refs: dict[str, JsonValue] | None
    ) -> None:
        waits = [c.wait for c in post if c.wait is not None]
        deadline = workflow.now() + timedelta(seconds=max((w.timeout_s for w in waits), default=0))
        interval = timedelta(seconds=min((w.interval_s for w in waits), default=60))
        while True:
            report = await self._probe("post", ref, post, key, refs)
            failed = [r for r in report.results if r.outcome is not Outcome.HOLDS]
            if not failed:
                return
            in_time = bool(waits) and workflow.now() + interval <= deadline
            d = route(self._situation(Kind.POST_VIOLATED, waits=in_time))
            if d.answer is Answer.WAIT:
                self._decide(d)
                self.ctx.set_state(self.step.n, StepState.WAITING)
                await workflow.sleep(interval)
                self.ctx.set_state(self.step.n, StepState.VERIFYING)
                continue
            first = failed[0]
            raise _Final(
                d,
                self._failure(
                    "postcondition_unmet", False, f"{first.condition.key()}: {first.detail}",
                    attribution="not_established",
                ),
            )


class _WaitOwner(Exception):
    def __init__(self, decision: Decision, owner: int, cond: Condition) -> None:
        self.decision = decision
        self.owner = owner
        self.cond = cond
