"""Starting a run (or queueing it), on the queue of a worker that can run it, and cancelling
it before or while it runs."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from plangate.activities.catalogue import announced
from plangate.client import placement, reports
from plangate.client.checked import Checked, PlanSource, checked
from plangate.client.errors import RunEnded, RunIdInUse
from plangate.client.handles import description, handle
from plangate.plans.load import PlanError
from plangate.plans.model import Plan
from plangate.plans.problem import Problem
from plangate.records import visibility
from plangate.records.interface import CANCEL_SIGNAL, PLAN_RUN
from plangate.records.proofs import principal_refusal, sign_submission
from plangate.records.report import RunReport, RunStatus
from plangate.records.run import CancelRequest, HistoryBound, RunInput
from plangate.workflows import summaries
from plangate.world.settings import SUBMITTER_KEY_VAR, Settings

MAX_START_DELAY = timedelta(days=30)
DETAILS_MAX_BYTES = 16_000  # Temporal refuses static details over 20,000 bytes


def start_delay(
    now: datetime, start_at: datetime | None, start_in: timedelta | None
) -> timedelta | None:
    """How long a queued run waits before it starts (None: it starts now)."""
    if start_at is not None and start_in is not None:
        raise ValueError("give a start time or a delay, not both")
    if start_at is not None:
        if start_at.tzinfo is None:
            raise ValueError(f"start time {start_at.isoformat()} has no time zone")
        start_in = start_at - now
        if start_in <= timedelta(0):
            raise ValueError(f"start time {start_at.isoformat()} is not in the future")
    if start_in is None:
        return None
    if not timedelta(0) < start_in <= MAX_START_DELAY:
        raise ValueError(f"a run may be queued for at most {MAX_START_DELAY.days} days")
    return start_in


def new_run_id() -> str:
    return f"plan-{uuid.uuid4().hex[:12]}"


def run_summary(plan: Plan) -> str:
    """The run's one line in the Temporal UI (its static summary): the goal, the first plan."""
    n = len(plan.steps)
    return summaries.clip(f"{plan.goal} · plan v1, {n} step{'s' if n != 1 else ''}")


def run_details(plan: Plan) -> str:
    """The run's details in the Temporal UI (markdown): its first plan, step by step."""
    lines = [f"**{plan.goal}**", ""]
    for k, v in (("on behalf of", plan.on_behalf_of), ("policy bundle", plan.policy_bundle),
                 ("made at", plan.made_at.isoformat() if plan.made_at else None)):
        if v:
            lines.append(f"- {k}: {v}")
    lines.append("")
    for st in plan.steps:
        after = f" after {', '.join(map(str, st.depends_on))}" if st.depends_on else ""
        about = summaries.target(st.args)
        lines.append(f"{st.n}. `{st.tool}`{' ' + about if about else ''}{after}")
    return summaries.clip("\n".join(lines), DETAILS_MAX_BYTES)


def refuse_principal(settings: Settings, plan: Plan) -> None:
    """Where the settings list the deployment's submitters, a plan this client's key may not
    submit (or that names a principal it may not act as): ``PlanError``. The worker refuses
    it again, whatever the client did."""
    known = settings.policy.submitter_map
    if not known:
        return
    key = settings.identity.submitter_key
    if key is None:
        raise PlanError([Problem.plan(
            f"this deployment takes runs only from the submitters it lists: set "
            f"{SUBMITTER_KEY_VAR} to your submitter key"
        )])
    me = known.get(key.name)
    if me is None:
        raise PlanError([Problem.plan(f"{key.name} is not a submitter of this deployment")])
    why = principal_refusal(me, plan.on_behalf_of)
    if why is not None:
        raise PlanError([why])


async def queue_for(client: Client, settings: Settings, plan: Plan) -> str:
    """The queue of a polling worker that can run ``plan``, else this client's own."""
    found = await placement.workers(client, settings.temporal, unannounced=False)
    own = announced(settings.catalogue)
    return placement.choose(plan, own, settings.temporal.task_queue, found.announcing)


async def submit(
    client: Client,
    settings: Settings,
    registered: bool,  # the namespace has plangate's search attributes
    source: Checked | PlanSource,
    *,
    run_id: str | None,
    start_at: datetime | None,
    start_in: timedelta | None,
    once: bool,
    fresh_id: bool,
    memo: Mapping[str, Any] | None,
) -> WorkflowHandle[Any, RunReport]:
    plan = checked(source, settings).plan
    refuse_principal(settings, plan)
    run_id = run_id or new_run_id()
    now = datetime.now(UTC)
    delay = start_delay(now, start_at, start_in)
    queue = await queue_for(client, settings, plan)
    key = settings.identity.submitter_key
    runs = settings.runs
    try:
        return await client.start_workflow(
            PLAN_RUN,
            RunInput(
                # the plan alone: its guards are the worker's to derive
                plan=plan, plan_made_at=plan.made_at or now,
                submission=sign_submission(key, run_id, plan, now) if key else None,
                history=HistoryBound(events=runs.history_events, bytes=runs.history_bytes),
                outage_patience_s=runs.outage_patience_s,
                search_attributes=registered,
            ),
            id=run_id,
            task_queue=queue,
            start_delay=delay,
            search_attributes=(
                visibility.initial(plan.goal, RunStatus.QUEUED if delay else RunStatus.RUNNING)
                if registered else None
            ),
            static_summary=run_summary(plan),
            static_details=run_details(plan),
            result_type=RunReport,
            id_reuse_policy=(
                WorkflowIDReusePolicy.REJECT_DUPLICATE if once or fresh_id
                else WorkflowIDReusePolicy.ALLOW_DUPLICATE
            ),
            memo=dict(memo) if memo else None,
            id_conflict_policy=(
                WorkflowIDConflictPolicy.USE_EXISTING if once
                else WorkflowIDConflictPolicy.UNSPECIFIED
            ),
        )
    except WorkflowAlreadyStartedError:
        if once:  # it ran, or is running: the same request, answered by that run
            return handle(client, run_id)
        if fresh_id:
            raise RunIdInUse(f"a run with id {run_id!r} exists (running or ended)") from None
        raise RunIdInUse(f"a run with id {run_id!r} is already running") from None


async def cancel(
    client: Client, settings: Settings, run_id: str, reason: str, requester: str
) -> None:
    desc = await description(client, run_id)
    if desc.status not in (None, WorkflowExecutionStatus.RUNNING):
        said = await reports.end_of(client, settings, run_id)
        raise RunEnded(f"run {run_id!r} has already ended: {said}")
    request = CancelRequest(reason=reason, requester=requester)
    if not await reports.begun(client, desc):
        # it has not begun (a signal would wait for its start): it never will
        await handle(client, run_id).terminate(
            request, reason=f"cancelled before it started: {reason or 'no reason given'}"
        )
        return
    await handle(client, run_id).signal(CANCEL_SIGNAL, request)
