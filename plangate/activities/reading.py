"""One read tool's call answered without a workflow: ``plangate mcp``'s fast path, a Temporal
standalone activity on the deployment's worker queue (docs/mcp.md, "what a read costs and why").

Every guard is decided here, on the worker, from its own catalogue and settings, by the code a
run's guards and calls go through: the plan's guards as ``guard.resolve`` derives them
(``activities.guarding.resolve``: the deployment's check, scope, Cedar policies, submitter),
then the tool's own activity body (``guarded_call.run_guarded``: the policy bundle, the
submission again, the scope after binding, the pre conditions read at the call, the post
conditions read just after). Nothing the request says about the call's guards is read: the
effect is the catalogue's, not the plan's or the client's.

What the call writes on the worker (``s3.get``'s file) is in a directory of its own, never a
run's, removed once it is answered; each such file is ledgered (``local_write``).

Only the plainest call is answered here: a tool this deployment declares ``read``, one step,
nothing waiting for a person, one attempt that succeeds with every post condition holding.
Anything else (a tool that is no read here, a refusal, a card, a pre or post condition that
does not hold, a tool error, a probe that cannot answer) is answered by a run: the activity
says why (``ReadAnswer.run``) and the front starts the one-step run, which decides it again
and answers as it always has. A refusal is not recorded here: the run records it, once. An
answer names the call it answers (``Asked``), which the front compares with its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from plangate.activities import guarded_call, policing, workspace
from plangate.activities.catalogue import catalogue
from plangate.activities.extensions import registry_for
from plangate.activities.guarding import resolve
from plangate.activities.probe_activity import ProbeActivities
from plangate.activities.tools.registry import ToolSpec
from plangate.plans.guards import step_conditions
from plangate.plans.model import Effect, Plan, Step
from plangate.records import keys
from plangate.records.calls import StepRef, ToolCall, ToolResult
from plangate.records.interface import READ_CALL_ACTIVITY
from plangate.records.policy import Decision
from plangate.records.reading import Asked, ReadAnswer, ReadCall
from plangate.records.report import (
    RunReport,
    RunStatus,
    StepReport,
    StepState,
    StepTimings,
    summarize,
)
from plangate.records.run import GuardRequest, Resolved
from plangate.world import decisions, submissions
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.settings import CatalogueSettings, PolicySettings, RunSettings

log = logging.getLogger(__name__)
# a read is answered within the front's own limit: its claim waits for Postgres only briefly
READ_CLAIM_PATIENCE_S = 5.0


def plain(plan: Plan, tools: Mapping[str, ToolSpec[Any]]) -> tuple[Step, ToolSpec[Any]] | str:
    """The plan's one step and its tool, where this deployment declares the tool ``read`` and
    the step asks nothing a run alone does; else why a run must answer."""
    if len(plan.steps) != 1:
        return "not one step"
    (step,) = plan.steps
    spec = tools.get(step.tool)
    if spec is None:
        return f"{step.tool} is not in this deployment's catalogue"
    if spec.effect is not Effect.READ:
        return f"{step.tool} is effect {spec.effect.value} in this deployment's catalogue"
    if step.effect is not Effect.READ:
        return f"step {step.n} is declared {step.effect.value}"
    if step.pre or step.post or step.binds or step.depends_on or step.approval:
        return f"step {step.n} carries conditions, bindings or an approval of its own"
    return step, spec


def succeeded(plan: Plan, step: Step, g: Resolved, out: ToolResult, call_id: str,
              at: datetime) -> RunReport:
    """The call's report, as the run's report of this step would read."""
    kept = summarize(out.output, True)
    made = plan.made_at or at
    rep = StepReport(
        n=step.n, tool=step.tool, plan_version=1, effect=Effect.READ, state=StepState.DONE,
        attempts=out.attempt, result=kept.value, result_digest=kept.digest,
        policy=g.guards[step.n].policy,
        timings=StepTimings(
            plan_made_at=made, precheck_read_at=None if out.checked is None
            else out.checked.read_at, dispatched_at=at, tool_started_at=out.started_at,
            tool_finished_at=out.finished_at,
        ),
    )
    rep.check_to_use_ms = rep.timings.check_to_use_ms
    return RunReport(
        run_id=call_id, status=RunStatus.SUCCEEDED, submitted_at=at, begun_at=at,
        goal=plan.goal, steps=[rep], replans_max=plan.budget.replans_max,
    )


class ReadActivities:
    def __init__(
        self, world: World, cat: CatalogueSettings, policy: PolicySettings,
        runs: RunSettings | None = None, book: policing.PolicyBook | None = None,
    ) -> None:
        self.world, self.cat, self.policy = world, cat, policy
        self.runs = runs or RunSettings()
        self.tools = registry_for(cat).tools
        self.probes = ProbeActivities(world, cat)
        self.book = book or policing.PolicyBook(policy, world.settings.scope, catalogue(cat))

    @activity.defn(name=READ_CALL_ACTIVITY)
    async def read_call(self, req: ReadCall) -> ReadAnswer:
        info = activity.info()
        call_id = info.activity_id  # the call's id: what its submission was signed for
        if info.workflow_id is not None:  # a run's reads go through its own steps
            return self._run(call_id, "scheduled by a workflow")
        # the call's own directory (``activities.workspace``): what it wrote is nobody's after
        scope = workspace.scope_of_call("")
        try:
            return await self._answer(req, call_id)
        finally:
            if scope is not None:
                await asyncio.shield(self._discard(scope))

    async def _discard(self, scope: str) -> None:
        try:
            await asyncio.to_thread(self.world.files.discard, scope)
        except Exception:  # the answer stands; a file left is in no run's directory
            log.warning("the files of read %s were not removed", scope, exc_info=True)

    async def _answer(self, req: ReadCall, call_id: str) -> ReadAnswer:
        info = activity.info()
        found = plain(req.plan, self.tools)
        if isinstance(found, str):
            return self._run(call_id, found)
        step, spec = found
        at = datetime.now(UTC)
        try:
            cedar = await asyncio.to_thread(self.book.current) if self.book.on else None
        except ToolError as e:
            return self._run(call_id, e.detail)
        kept: list[tuple[int, str, Decision]] = []
        # Temporal's clock, not the request's, judges the submission's age
        asked = GuardRequest(plan=req.plan, version=1, workflow_id=call_id,
                             submission=req.submission,
                             started_at=info.current_attempt_scheduled_time)
        g = await asyncio.to_thread(resolve, asked, self.cat, self.world.settings,
                                    self.policy, self.runs, cedar, kept)
        if g.refusal is not None:
            return self._run(call_id, f"{g.refusal_code}: {g.refusal}")
        taken = await self._claimed(req, call_id, info.activity_run_id or "")
        if taken is not None:
            return self._run(call_id, taken)
        guard = g.guards[step.n]
        if guard.approval:
            return self._run(call_id, "the call waits for a person")
        if guard.effect is not Effect.READ:
            return self._run(call_id, f"step {step.n} is guarded as {guard.effect.value}")
        for n, tool, d in kept:  # as guard.resolve keeps them, for the call that goes on
            await decisions.record(self.world, d, run_id=call_id, plan_version=1, step=n,
                                   tool=tool, principal=g.on_behalf_of, at_call=False)
        pre, post = step_conditions(guard, step.args, [], [])
        call = ToolCall(
            step=StepRef(run_id=call_id, plan_version=1, n=step.n, tool=step.tool,
                         args=step.args),
            idempotency_key=keys.idempotency_key(call_id, "read", keys.step_call(1, step.n)),
            on_behalf_of=g.on_behalf_of, policy_bundle=g.policy_bundle,
            check=pre, after=post, submission=req.submission,
        )
        try:
            out = await guarded_call.run_guarded(spec, self.world, self.policy, self.probes,
                                                 self.book, call)
        except ApplicationError as e:  # refused at the call, or the tool failed: a run says
            return self._run(call_id, f"{e.type}: {e.message}")
        if post and (out.after is None or not out.after.all_hold):
            return self._run(call_id, "its post conditions were not read holding")
        log.info("%s: %s answered without a run", call_id, step.tool)
        return ReadAnswer(report=succeeded(req.plan, step, g, out, call_id, at),
                          asked=Asked.of(call_id, req.plan))

    async def _claimed(self, req: ReadCall, call_id: str, execution: str) -> str | None:
        """Why this read may not act on its submission, or None: a submission answers one
        read (this activity execution: its attempts share it); the same id started again by
        anyone with the captured input is another execution, and reads nothing."""
        sub = req.submission
        if not self.policy.submitters or sub is None:
            return None
        try:
            taken = await submissions.claim_patiently(
                self.world, sub, f"{call_id}/{execution}", patience_s=READ_CLAIM_PATIENCE_S)
        except submissions.Unrecorded as e:
            return f"system_unavailable: {e}"
        if taken is None:
            return None
        return (f"not_permitted: the submission of {sub.submitter} already answered read "
                f"{taken}: a submission answers one call")

    @staticmethod
    def _run(call_id: str, why: str) -> ReadAnswer:
        log.info("%s: answered by a run: %s", call_id, why)
        return ReadAnswer(run=why[:500])

