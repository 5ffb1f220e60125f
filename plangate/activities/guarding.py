"""The worker derives every guard of a run itself: a local activity (``guard.resolve``), asked
once per plan version, its answer recorded in the history so a replay sees what the run saw.

From the plan and what only the run knows (its id, its submission), and from this worker's own
catalogue and settings: each step's effect, contract, reader, version binding and whether it
waits for a person; the approvers whose proofs count; who submitted the run and whether it may
act as the principal it names; the policy bundle it is decided under. The first version is
checked as ``plangate check`` checks it (a raw start skips no check). Nothing an input says
about its own guards is read. In the same activity, with those guards, the steps a new run
starts with make their first read (``first_reads``): the guards cost no local activity of
their own before the first step acts. A re-planned version's guards are derived by the review
of the proposal (``replanner.review``), on the worker too.

The run's limits are the deployment's too (``RunSettings``): its outage patience and history
bound come with the guards, and the run takes the smaller of those and its input's. Who may
answer a card is asked again where an answer is recorded (``guard.approvers``): a key removed
from ``PLANGATE_APPROVERS`` since the guards were derived neither approves nor rejects.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib

from temporalio import activity

from plangate.activities.catalogue import catalogue, guarded, plan_problems
from plangate.activities.policing import PolicyBook, call_request
from plangate.activities.probe_activity import ProbeActivities
from plangate.plans import bindings
from plangate.plans.guards import StepGuard, step_conditions
from plangate.plans.model import Plan
from plangate.records.calls import ProbeRequest, StepRef
from plangate.records.interface import APPROVERS_ACTIVITY, DECIDE_ACTIVITY, GUARD_ACTIVITY
from plangate.records.policy import Decision, Outcome
from plangate.records.proofs import submission_refusal
from plangate.records.read_ahead import ReadAhead
from plangate.records.run import (
    Approvers,
    ApproversRequest,
    Decided,
    DecideRequest,
    GuardRequest,
    HistoryBound,
    Resolved,
)
from plangate.world import decisions, submissions
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.policies import Bundle
from plangate.world.settings import CatalogueSettings, PolicySettings, RunSettings, WorldSettings

DECISION_ROW_TRY_S = 4.0  # a bound step's decision row, kept if Postgres answers in time


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def approver_keys(policy: PolicySettings) -> dict[str, str]:
    """The approvers whose proofs count: name -> public key, base64."""
    return {name: _b64(key) for name, key in policy.approvers}


def derive(
    req: GuardRequest, cat: CatalogueSettings, policy: PolicySettings,
    cedar: Bundle | None = None, kept: list[tuple[int, str, Decision]] | None = None,
) -> Resolved:
    """The guards, approvers, submitter and policy of the plan version, from this worker's
    catalogue and policy; the refusal when the run's submission does not let it act.
    ``cedar``: the deployment's Cedar policies in force (``PLANGATE_POLICIES``): each step
    decided as written, the run decided under their bundle."""
    plan = req.plan
    first = req.version == 1
    on_behalf_of = plan.on_behalf_of if first else req.on_behalf_of
    bundle = (plan.policy_bundle or policy.policy_bundle) if first else req.policy_bundle
    g = guarded(plan, cat, policy, replanned=not first)
    guards = g.guards
    refusal: str | None = None
    if cedar is not None:
        bundle = cedar.bundle
        guards, refused = decided(plan, guards, cat, cedar, on_behalf_of, kept)
        if refused is not None:
            refusal = f"step {refused[0]}: {refused[1]}"
    out = Resolved(
        guards=guards, systems=g.systems, approval_ttl_s=g.approval_ttl_s,
        approvers=approver_keys(policy),
        on_behalf_of=on_behalf_of, policy_bundle=bundle, whole_id_keys=True,
    )
    if refusal is not None:
        return out.model_copy(update={"refusal": refusal, "refusal_code": "policy_denied"})
    if policy.submitters:
        why = submission_refusal(
            req.submission, policy.submitter_map, workflow_id=req.workflow_id,
            plan=plan if first else None, on_behalf_of=on_behalf_of, started_at=req.started_at,
        )
        if why is not None:
            return out.model_copy(update={"refusal": why, "refusal_code": "not_permitted"})
        if req.submission is not None:  # verified just now: the run's proven submitter
            known = policy.submitter_map[req.submission.submitter]
            out = out.model_copy(update={
                "submitter": known.name, "submitter_key": _b64(known.public),
            })
    return out


def decided(
    plan: Plan, guards: dict[int, StepGuard], cat: CatalogueSettings, cedar: Bundle,
    principal: str | None, kept: list[tuple[int, str, Decision]] | None = None,
) -> tuple[dict[int, StepGuard], tuple[int, str] | None]:
    """Each step decided by the policies as written (a ``${name}`` not bound yet is left out;
    the call decides again, bound): forbidden, the plan is refused (the step and why);
    permitted with people, the step waits for a card. Totals are the call's to weigh (the
    ledger's, at the call). ``kept``: each decision that was not a plain permit is added.
    The steps are decided in one Cedar call (``Bundle.decide_all``), each remembered for its
    call on this worker to take where nothing it reads changed (``Bundle.recall``)."""
    tools = catalogue(cat).tools
    out = dict(guards)
    asked = [(step, g, call_request(step.tool, info, g.effect, step.args, principal,
                                    approval_asked=g.approval))
             for step in plan.steps
             if (info := tools.get(step.tool)) is not None
             and (g := guards.get(step.n)) is not None]
    for (step, g, request), d in zip(asked, cedar.decide_all([r for *_, r in asked]),
                                     strict=True):
        cedar.remember(request, d)
        if kept is not None and decisions.worth_keeping(d):
            kept.append((step.n, step.tool, d))
        out[step.n] = g = g.model_copy(update={"policy": d.mark()})
        if d.refuses:
            named = ", ".join(d.policies) or "no policy permits it (default deny)"
            return out, (step.n, f"{step.tool} is forbidden by the deployment's policy "
                         f"({named}, bundle {d.bundle}): {d.reason}"[:2000])
        if d.enforced and d.outcome is Outcome.PERMIT_WITH_PEOPLE and not g.approval:
            out[step.n] = g.model_copy(update={"approval": True})
    return out, None


def resolve(
    req: GuardRequest, cat: CatalogueSettings, world: WorldSettings, policy: PolicySettings,
    runs: RunSettings | None = None, cedar: Bundle | None = None,
    kept: list[tuple[int, str, Decision]] | None = None,
) -> Resolved:
    """``derive``, with the deployment's limits on the run (``runs``); and the first version
    checked as ``plangate check`` checks it."""
    runs = runs or RunSettings()
    out = derive(req, cat, policy, cedar, kept).model_copy(update={
        "outage_patience_s": runs.outage_patience_s,
        "history": HistoryBound(events=runs.history_events, bytes=runs.history_bytes),
        "tool_heartbeat_s": runs.tool_heartbeat_s,
    })
    if out.refusal is None and req.version == 1:
        problems = plan_problems(req.plan, cat, world)
        if problems:
            why = f"the plan does not pass this deployment's check: {'; '.join(problems[:5])}"
            return out.model_copy(update={"refusal": why[:2000], "refusal_code": "bad_plan"})
    return out


def first_reads(req: GuardRequest, out: Resolved) -> dict[int, tuple[ReadAhead, ProbeRequest]]:
    """What each step of ``req.reads`` reads before its call, with the guards just derived
    (``ReadAhead.whole``, as the step itself would ask), and the request that reads it. A step
    whose arguments or conditions hold a ``${name}`` reads itself, later."""
    guarded = out.guarded(req.plan)
    asked: dict[int, tuple[ReadAhead, ProbeRequest]] = {}
    for n, key in req.reads.items():
        step, g = guarded.plan.step(n), guarded.guard(n)
        try:
            args = bindings.resolve(step.args, {}, "args")
            plan_pre = [c.model_copy(update={"args": bindings.resolve(c.args, {}, "pre")})
                        for c in step.pre]
            plan_post = [c.model_copy(update={"args": bindings.resolve(c.args, {}, "post")})
                         for c in step.post]
        except bindings.BindingError:
            continue
        pre, post = step_conditions(g, args, plan_pre, plan_post)
        ahead = ReadAhead.whole(step, g, args, pre, post)
        if ahead.conditions:
            ref = StepRef(run_id=req.workflow_id, plan_version=req.version, n=n,
                          tool=step.tool, args=args)
            asked[n] = ahead, ProbeRequest(step=ref, conditions=ahead.conditions,
                                           idempotency_key=key, lenient=ahead.lenient)
    return asked


class GuardActivities:
    def __init__(
        self, world: World, cat: CatalogueSettings, policy: PolicySettings,
        runs: RunSettings | None = None, book: PolicyBook | None = None,
    ) -> None:
        self.world, self.cat, self.policy = world, cat, policy
        self.runs = runs or RunSettings()
        self.probes = ProbeActivities(world, cat)
        self.book = book or PolicyBook(policy, world.settings.scope, catalogue(cat))

    async def _claimed(self, req: GuardRequest, out: Resolved) -> Resolved:
        """A verified submission taken for this run chain, once: one a run of another chain
        took first (a captured submission replayed under the same id) acts for nobody."""
        sub = req.submission
        if not self.policy.submitters or sub is None or req.first_run_id is None:
            return out
        execution = f"{activity.info().workflow_id or req.workflow_id}/{req.first_run_id}"
        try:
            taken = await submissions.claim_patiently(self.world, sub, execution)
        except submissions.Unrecorded as e:  # a guard: nothing acts on what it cannot record
            return out.model_copy(update={"refusal": str(e),
                                          "refusal_code": "system_unavailable"})
        if taken is None:
            return out
        why = (f"the submission of {sub.submitter} already started run {taken}: a submission "
               "starts one run (sign the plan again for a new one)")
        return out.model_copy(update={"refusal": why, "refusal_code": "not_permitted"})

    @activity.defn(name=APPROVERS_ACTIVITY)
    async def approvers(self, req: ApproversRequest) -> Approvers:
        """This worker's approvers now (its settings, read at its start)."""
        return Approvers(approvers=approver_keys(self.policy))

    @activity.defn(name=DECIDE_ACTIVITY)
    async def decide(self, req: DecideRequest) -> Decided:
        """A step's call decided with its arguments bound, before the call (which decides
        again): what its version's guards could not decide while a ``${name}`` was unbound."""
        info = catalogue(self.cat).tools.get(req.tool)
        if not self.book.on or info is None:
            return Decided()
        try:
            cedar = await asyncio.to_thread(self.book.current)
        except ToolError:  # the policies cannot be read now: the call refuses, itself
            return Decided()
        request = call_request(req.tool, info, req.effect, req.args, req.on_behalf_of,
                               approval_asked=req.approval_asked)
        d = cedar.decide(request)
        cedar.remember(request, d)  # for the call, where it asks the same (``decided``)
        # bookkeeping: the call keeps its own decision; a Postgres that hangs delays this
        # answer a few seconds, never past the local activity's timeout
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(decisions.record(
                self.world, d, run_id=req.workflow_id, plan_version=req.plan_version,
                step=req.step, tool=req.tool, principal=req.on_behalf_of, at_call=False),
                DECISION_ROW_TRY_S)
        return Decided(policy=d.mark())

    @activity.defn(name=GUARD_ACTIVITY)
    async def resolve(self, req: GuardRequest) -> Resolved:
        # path checks resolve symlinks on disk: off the event loop
        cedar = None
        if self.book.on:
            try:
                cedar = await asyncio.to_thread(self.book.current)
            except ToolError as e:  # the policies in force cannot be read: nothing runs
                return Resolved(guards={}, refusal=e.detail, refusal_code="policy_denied")
        kept: list[tuple[int, str, Decision]] = []
        out = await asyncio.to_thread(
            resolve, req, self.cat, self.world.settings, self.policy, self.runs, cedar, kept
        )
        if out.refusal is None:
            out = await self._claimed(req, out)
        for n, tool, d in kept:
            await decisions.record(self.world, d, run_id=req.workflow_id, plan_version=req.version,
                                   step=n, tool=tool, principal=out.on_behalf_of, at_call=False)
        if out.refusal is not None or not req.reads:
            return out
        asked = first_reads(req, out).values()
        answers = await asyncio.gather(*(self.probes.read(r) for _, r in asked))
        # a read any probe could not answer is no read: that step reads itself, with its own
        # retries and patience for a system that is down
        reads = {
            ahead.n: ahead.answered(a)
            for (ahead, _), a in zip(asked, answers, strict=True) if not a.unknown
        }
        return out.model_copy(update={"reads": reads})
