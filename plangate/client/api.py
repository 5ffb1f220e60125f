"""The Python API: everything the command line does, for an agent or a service written in
Python. The CLI is built on it. An example (it runs as written, with top-level ``await``, in a
directory holding ``plan.json`` whose step 1 waits for approval; tests/test_api_examples.py
runs it)::

    from datetime import timedelta

    from plangate import Plangate

    pg = await Plangate.connect()                  # the same settings and connection as the CLI
    plan = pg.check("plan.json")                   # PlanError naming each problem, or the plan
    run_id = await pg.start(plan)
    card = await pg.wait_for_card(run_id, step=1)  # the card once it waits for a person
    pending = await pg.pending_approvals()         # the cards waiting, across runs
    await pg.approve(run_id, card.step, card.digest)
    async for report in pg.watch(run_id):          # each change of the run report
        print(report.status)
    report = await pg.result(run_id)               # the final report (waits for the end)
    later = await pg.start(plan, start_in=timedelta(hours=1))  # queued: starts in an hour
    await pg.cancel(later, reason="goal withdrawn", requester="ops@example.com")
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from plangate.errors import PlangateError, RunError
from plangate.records.approvals import (
    ApprovalAnswer,
    ApprovalReceipt,
    ApprovalRecord,
    CardStatus,
    Decision,
)
from plangate.records.interface import (
    APPROVE_UPDATE,
    CANCEL_SIGNAL,
    PLAN_RUN,
    REJECT_UPDATE,
    REPORT_QUERY,
)
from plangate.records.report import (
    Cancellation,
    RunReport,
    RunStatus,
    StepReport,
    StepState,
    StepTimings,
)
from plangate.workflows import summaries
from plangate.world.settings import APPROVER_KEY_VAR, SUBMITTER_KEY_VAR, Settings

if TYPE_CHECKING:
    from temporalio.client import (
        Client,
        WorkflowExecutionDescription,
        WorkflowExecutionStatus,
        WorkflowHandle,
    )

    from plangate.client.checked import Checked, PlanSource
    from plangate.plans.model import Plan
    from plangate.records.signing import SigningKey
    from plangate.replanner.planner import Draft


def ended_report(error: BaseException) -> RunReport | None:
    """The report a run that did not succeed ends its execution with: the details of its
    failure (``WorkflowFailureError`` from a handle's ``result``, or the failure itself).
    None for any other failure (a run from before, one Temporal ended)."""
    from temporalio.exceptions import ApplicationError

    from plangate.records.interface import ENDED_ERRORS

    cause = getattr(error, "cause", error)
    if not isinstance(cause, ApplicationError) or cause.type not in ENDED_ERRORS:
        return None
    if not cause.details:
        return None
    return RunReport.model_validate(cause.details[0])


_CLOSED_STATUS = {  # by the name of Temporal's WorkflowExecutionStatus, loaded with the client
    "CANCELED": RunStatus.CANCELLED,
    "TERMINATED": RunStatus.CANCELLED,
    "FAILED": RunStatus.FAILED,
    "TIMED_OUT": RunStatus.FAILED,
}


_FINAL_VALUES = {s.value for s in RunStatus if s.final}


class UnknownRun(RunError, LookupError):
    """No run with this id in the namespace."""


class RunIdInUse(RunError, ValueError):
    """A run with this id is running."""


class RunEnded(RunError, ValueError):
    """The run has already ended (nothing to cancel)."""


class AnswerRefused(RunError, ValueError):
    """An approval answer the run refused (the message says why); nothing was recorded."""


class NoApproverKey(PlangateError, ValueError):
    """This process holds no approver's key to sign an answer with (or not the one asked)."""


class NoWorkerAnswered(RunError, TimeoutError):
    """No worker answered the run's report query in time (none polls its task queue, or all
    are busy or gone); the message says what Temporal knows of the run."""

    def __init__(self, message: str, execution_status: str) -> None:
        super().__init__(message)
        self.execution_status = execution_status


class SearchAttributesMissing(RunError, RuntimeError):
    """The namespace lacks plangate's search attributes: runs cannot be found by status."""


MAX_START_DELAY = timedelta(days=30)

PENDING_RUNS_MAX = 500  # runs whose report is read for one listing of pending cards
PENDING_LIST_MAX = 10_000  # runs awaiting approval listed with their memos
REPORT_QUERY_TIMEOUT = timedelta(seconds=10)  # a worker answers a query at once, or is gone
PENDING_QUERY_TIMEOUT = timedelta(seconds=5)  # a run whose worker does not answer is skipped
_PENDING_QUERIES_AT_ONCE = 16


@dataclass(frozen=True)
class PendingCard:
    """A card that waits for a person: the run it belongs to, and the card's record (its
    ``card``, ``digest``, ``expires_at``)."""

    run_id: str
    goal: str
    record: ApprovalRecord


@dataclass(frozen=True)
class PendingApprovals:
    """The cards waiting across the open runs of one task queue, the soonest to expire first."""

    cards: list[PendingCard]
    runs: int  # open runs listed
    unanswered: list[str]  # run ids whose report could not be read (no worker polling?)
    truncated: bool  # more runs than one listing reads (``PENDING_*_MAX``): the first only
    asked: int = 0  # runs whose report was read (their memo held no cards it could trust)


def card_fate(rep: RunReport, step: int, digest: str) -> str:
    """What became of the card ``digest`` of ``step``, from the run report, in a few words."""
    for a in reversed(rep.approvals):
        if a.digest != digest:
            continue
        if a.status is CardStatus.SUPERSEDED:
            return f"the card of step {a.step} was superseded by a new card (the world moved)"
        if a.answer is not None:
            x = a.answer
            return (
                f"the card of step {a.step} was already answered: {x.decision} by "
                f"{x.by or 'someone'} at {x.at.isoformat()}"
            )
        if a.status is CardStatus.EXPIRED:
            return f"the card of step {a.step} expired unanswered at {a.expires_at.isoformat()}"
        return f"the card of step {a.step} was never answered"
    return f"no card of step {step} has digest {digest}"


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


DETAILS_MAX_BYTES = 16_000  # Temporal refuses static details over 20,000 bytes


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


@dataclass(frozen=True)
class Listed:
    """A run as visibility lists it (``Plangate.runs``)."""

    run_id: str
    status: str  # a RunStatus value (``unknown`` where the attributes are missing)
    goal: str
    started_at: datetime
    closed_at: datetime | None


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# A run that did not succeed ends its execution Failed (runs from before the ``truthful-end``
# patch: Completed); its PlangateStatus says how.
_UNSUCCESSFUL = '("Completed", "Failed")'
_EXECUTION = {  # how a RunStatus is found: the execution's own status, then plangate's
    RunStatus.QUEUED: '("Running")', RunStatus.RUNNING: '("Running")',
    RunStatus.AWAITING_APPROVAL: '("Running")', RunStatus.SUCCEEDED: '("Completed")',
    RunStatus.HALTED: _UNSUCCESSFUL, RunStatus.CANCELLED: _UNSUCCESSFUL,
    RunStatus.FAILED: _UNSUCCESSFUL,
}
_ENDED_BY_TEMPORAL = {  # ended without the workflow's own last word (terminated, timed out)
    RunStatus.CANCELLED: 'ExecutionStatus IN ("Canceled", "Terminated")',
    # failed without a report of its own to say how (its input refused): not a run that
    # failed its execution to say it halted or was cancelled
    RunStatus.FAILED: 'ExecutionStatus = "TimedOut" OR (ExecutionStatus = "Failed" AND '
    'PlangateStatus NOT IN ("halted", "cancelled", "failed"))',
}


def runs_query(task_queue: str, status: RunStatus | None = None) -> str:
    """The visibility query for the runs on ``task_queue`` and its catalogue queues (in
    ``status``). Each execution of a run that continued as new is left out but the latest. A
    run's PlangateStatus is its last word: a run Temporal ended (terminated, timed out) is
    found by its execution status."""
    from plangate.records import placement, visibility

    q = (f'((WorkflowType = "{PLAN_RUN}" AND {placement.visibility_clause(task_queue)}) OR '
         f"{visibility.GUARDED})")
    if status is None:
        return q + ' AND ExecutionStatus != "ContinuedAsNew"'
    own = f"ExecutionStatus IN {_EXECUTION[status]} AND {visibility.STATUS.name} = " + _quoted(
        status.value
    )
    if status in _ENDED_BY_TEMPORAL:
        return f"{q} AND (({own}) OR {_ENDED_BY_TEMPORAL[status]})"
    return f"{q} AND {own}"


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:200] or type(e).__name__


class Plangate:
    """A client of plangate runs on one Temporal namespace and task queue."""

    def __init__(self, client: Client, settings: Settings) -> None:
        self.client = client
        self.settings = settings
        self._registered: bool | None = None

    @classmethod
    async def connect(cls, settings: Settings | None = None) -> Plangate:
        """A client of the deployment ``settings`` describe; None: this process's environment's
        (as the CLI reads it)."""
        from plangate.client.connection import connect

        settings = settings or Settings.from_env(os.environ)
        return cls(await connect(settings), settings)

    # -- plans --------------------------------------------------------------------------------
    def check(self, source: PlanSource, *, strict: bool = False) -> Checked:
        """Validate and lint (see ``check``); starts nothing."""
        from plangate.client.checked import check

        return check(source, self.settings, strict=strict)

    async def plan(self, goal: str, context: str | None = None) -> Draft:
        """A first plan toward ``goal`` from the configured model, checked and linted strictly,
        for a person to read (``Draft.as_yaml``); runs nothing. The model's client loads here,
        not with the API."""
        from plangate.replanner.planner import draft_plan

        s = self.settings
        return await draft_plan(goal, s.model, s.catalogue, s.world, context)

    # -- runs ---------------------------------------------------------------------------------
    async def start(
        self,
        source: Checked | PlanSource,
        *,
        run_id: str | None = None,
        start_at: datetime | None = None,
        start_in: timedelta | None = None,
        once: bool = False,
        fresh_id: bool = False,
        memo: Mapping[str, Any] | None = None,
    ) -> str:
        """Start a run of the plan (or queue it: ``start_at`` a time, ``start_in`` a delay); the
        run id. A ``Checked`` plan from ``check`` is not checked again; anything else is.
        ``once``, ``fresh_id``, ``memo``: see ``submit``."""
        handle = await self.submit(
            source, run_id=run_id, start_at=start_at, start_in=start_in, once=once,
            fresh_id=fresh_id, memo=memo,
        )
        return handle.id

    async def submit(
        self,
        source: Checked | PlanSource,
        *,
        run_id: str | None = None,
        start_at: datetime | None = None,
        start_in: timedelta | None = None,
        once: bool = False,
        fresh_id: bool = False,
        memo: Mapping[str, Any] | None = None,
    ) -> WorkflowHandle[Any, RunReport]:
        """``start``, returning the Temporal handle of this very execution. The staleness
        window runs from the plan's ``made_at``, or from submission when it has none.

        ``once`` (with a ``run_id`` derived from the request, as ``plangate mcp`` derives it
        from a call's request identity): a run of this id is started at most once, ever; a
        run of it that is running or has ended is answered instead of a new one (Temporal's
        id reuse and conflict policies, so two racing starts still make one run).
        ``fresh_id``: refused (``RunIdInUse``) where any run, running or ended, had the id.
        ``memo``: the run's memo (``plangate mcp`` records there who started it)."""
        from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
        from temporalio.exceptions import WorkflowAlreadyStartedError

        from plangate.client.checked import checked
        from plangate.records import visibility
        from plangate.records.proofs import sign_submission
        from plangate.records.run import HistoryBound, RunInput

        plan = checked(source, self.settings).plan
        self._refuse_principal(plan)
        run_id = run_id or new_run_id()
        now = datetime.now(UTC)
        delay = start_delay(now, start_at, start_in)
        queue = await self.queue_for(plan)
        key = self.settings.identity.submitter_key
        runs = self.settings.runs
        registered = await self.search_attributes_registered()
        try:
            return await self.client.start_workflow(
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
                return self.handle(run_id)
            if fresh_id:
                raise RunIdInUse(f"a run with id {run_id!r} exists (running or ended)") from None
            raise RunIdInUse(f"a run with id {run_id!r} is already running") from None

    async def queue_for(self, plan: Plan) -> str:
        """The task queue a run of ``plan`` starts on: that of a polling worker whose catalogue
        has every tool and probe it names (``plangate.client.placement.choose``), else, with no
        worker announcing, that of this client's own catalogue. ``NoCapableWorker`` when
        workers poll and none can run it; a queued run is placed the same way, now."""
        from plangate.activities.catalogue import announced
        from plangate.client.placement import choose, workers

        found = await workers(self.client, self.settings.temporal, unannounced=False)
        own = announced(self.settings.catalogue)
        return choose(plan, own, self.settings.temporal.task_queue, found.announcing)

    def _refuse_principal(self, plan: Plan) -> None:
        """Where this client knows the deployment's submitters, a plan its own key may not
        submit (or that names a principal it may not act as) is refused here, before any
        workflow starts; the worker refuses it again, whatever the client did."""
        from plangate.plans.load import PlanError
        from plangate.plans.problem import Problem

        known = self.settings.policy.submitter_map
        if not known:
            return
        key = self.settings.identity.submitter_key
        if key is None:
            raise PlanError([Problem.plan(
                f"this deployment takes runs only from the submitters it lists: set "
                f"{SUBMITTER_KEY_VAR} to your submitter key"
            )])
        me = known.get(key.name)
        if me is None:
            raise PlanError([Problem.plan(f"{key.name} is not a submitter of this deployment")])
        from plangate.records.proofs import principal_refusal

        why = principal_refusal(me, plan.on_behalf_of)
        if why is not None:
            raise PlanError([why])

    def approver_key(self, name: str = "") -> SigningKey:
        """The key an answer is signed with: the one named ``name`` among this process's
        approver keys (``PLANGATE_APPROVER_KEY``), else the first."""
        keys = self.settings.identity.approver_keys
        if not keys:
            raise NoApproverKey(
                f"no approver key: set {APPROVER_KEY_VAR} to your key file (`plangate key new "
                "NAME` makes one; the deployment lists its public line in PLANGATE_APPROVERS)"
            )
        if name:
            for k in keys:
                if k.name == name:
                    return k
            raise NoApproverKey(
                f"no approver key named {name!r} in {APPROVER_KEY_VAR} (it holds "
                f"{', '.join(k.name for k in keys)})"
            )
        return keys[0]

    async def search_attributes_registered(self) -> bool:
        """Whether the namespace has plangate's search attributes, with their types (asked
        once; a server that cannot say, such as the time-skipping test server, has not)."""
        from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
        from temporalio.service import RPCError

        from plangate.records import visibility

        if self._registered is None:
            request = ListSearchAttributesRequest(namespace=self.settings.temporal.namespace)
            try:
                have = (await self.client.operator_service.list_search_attributes(request))
            except RPCError:
                self._registered = False
            else:
                custom = dict(have.custom_attributes)
                self._registered = all(
                    custom.get(k.name) == int(k.indexed_value_type) for k in visibility.KEYS
                )
        return self._registered

    async def runs(
        self, status: RunStatus | str | None = None, limit: int = 100
    ) -> list[Listed]:
        """The runs on this task queue (in ``status``), newest first, through Temporal's
        visibility (eventually consistent: a change shows within a second or so)."""
        from plangate.records import visibility

        status = RunStatus(status) if status is not None else None
        if status is not None and not await self.search_attributes_registered():
            names = ", ".join(f"{n} ({t})" for n, t in visibility.registration())
            raise SearchAttributesMissing(
                f"namespace {self.settings.temporal.namespace} has no search attributes "
                f"{names}: register them to list runs by status (docs/watching.md)"
            )
        out: list[Listed] = []
        query = runs_query(self.settings.temporal.task_queue, status)
        async for wf in self.client.list_workflows(query, limit=limit):
            sa = wf.typed_search_attributes
            ended = _CLOSED_STATUS.get(wf.status.name) if wf.status is not None else None
            said = sa.get(visibility.STATUS)
            # a run's own last word when it had one (a halted run's execution failed too)
            if said is not None and said in _FINAL_VALUES:
                shown = said
            else:
                shown = ended.value if ended is not None else said or "unknown"
            out.append(Listed(
                run_id=wf.id, status=shown, goal=sa.get(visibility.GOAL) or "",
                started_at=wf.start_time, closed_at=wf.close_time,
            ))
        return out

    async def approve(
        self, run_id: str, step: int, digest: str, *, by: str = "", at: datetime | None = None
    ) -> ApprovalReceipt:
        """Approve the card of ``step`` by its digest, signed with the approver key named
        ``by`` (default: the first; ``approver_key``). Refused: no such key, a key the
        deployment does not know, the run's own submitter, a wrong digest, an expired card, an
        unknown step, a second answer; nothing is recorded then. ``at``: the time it is signed
        at (default: now; a time-skipping test server's clock is not this machine's)."""
        answer = self.signed_answer(run_id, step, digest, Decision.APPROVE, "", by, at)
        return await self._answer(run_id, APPROVE_UPDATE, answer)

    async def reject(
        self, run_id: str, step: int, digest: str, *, reason: str, by: str = "",
        at: datetime | None = None,
    ) -> ApprovalReceipt:
        """Reject the card of ``step``: the step follows its ``on_unmet`` (signed as
        ``approve``)."""
        answer = self.signed_answer(run_id, step, digest, Decision.REJECT, reason, by, at)
        return await self._answer(run_id, REJECT_UPDATE, answer)

    def signed_answer(
        self, run_id: str, step: int, digest: str, decision: Decision, reason: str = "",
        by: str = "", at: datetime | None = None,
    ) -> ApprovalAnswer:
        """An answer signed with the approver key named ``by`` (``approver_key``): what the
        ``approve`` and ``reject`` Updates take, and what a client that can only signal sends
        as the ``answer`` signal."""
        from plangate.records.proofs import sign_answer

        key = self.approver_key(by)
        proof = sign_answer(
            key, run_id=run_id, step=step, digest=digest, decision=decision, reason=reason,
            now=at or datetime.now(UTC),
        )
        return ApprovalAnswer(
            step=step, digest=digest, decision=decision, by=key.name, reason=reason, proof=proof
        )

    async def _answer(self, run_id: str, update: str, answer: ApprovalAnswer) -> ApprovalReceipt:
        from temporalio.client import WorkflowUpdateFailedError
        from temporalio.service import RPCError, RPCStatusCode

        await self._describe(run_id)
        update_id = f"answer-{uuid.uuid4().hex}"
        try:
            receipt: ApprovalReceipt = await self.handle(run_id).execute_update(
                update, answer, id=update_id, result_type=ApprovalReceipt
            )
        except WorkflowUpdateFailedError as e:
            cause = e.cause
            raise AnswerRefused(str(getattr(cause, "message", cause) or e)) from None
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                raise await self._ended(run_id, answer) from None
            raise
        except Exception:
            # The workflow may have taken the answer and only its receipt does not read here
            # (written by a worker with other keys): an answer recorded is never an error.
            recorded = await self._recorded(run_id, update_id, answer)
            if recorded is None:
                raise
            return recorded
        return receipt

    async def _recorded(
        self, run_id: str, update_id: str, answer: ApprovalAnswer
    ) -> ApprovalReceipt | None:
        """The receipt of update ``update_id`` from the run's history when the workflow
        completed it successfully (it passed the validator and the card took the answer),
        else None. Read without decoding a payload."""
        from temporalio.api.enums.v1 import EventType

        async for event in self.handle(run_id).fetch_history_events():
            if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
                continue
            done = event.workflow_execution_update_completed_event_attributes
            if done.meta.update_id == update_id and done.outcome.HasField("success"):
                return ApprovalReceipt(
                    step=answer.step, digest=answer.digest, decision=answer.decision,
                    at=event.event_time.ToDatetime(UTC),
                )
        return None

    async def _ended(self, run_id: str, answer: ApprovalAnswer) -> RunEnded:
        """Why an answer to an ended run is refused: what became of its card."""
        from temporalio.service import RPCError

        try:
            rep = await self.report(run_id)
        except (RPCError, UnknownRun):
            return RunEnded(f"run {run_id!r} has ended: no card waits for an answer")
        fate = card_fate(rep, answer.step, answer.digest)
        return RunEnded(f"run {run_id!r} has ended ({rep.status.value}): {fate}")

    async def pending_approvals(self) -> PendingApprovals:
        """The approval cards waiting for a person across the open runs of this task queue,
        the soonest to expire first. Where the namespace has plangate's search attributes, one
        visibility query lists the runs awaiting approval with their memos, which hold their
        cards (``records.cards``); a run whose memo has none it can trust (begun before runs
        kept one, or a memo it did not write) is asked for its report. Elsewhere every open run
        is asked. A run whose report cannot be read in time (no worker polling) is named in
        ``unanswered``; a queued run has no card yet."""
        import asyncio  # loaded by a call, not by the import: checking a plan needs none

        from temporalio.service import RPCError, RPCStatusCode

        from plangate.records import visibility
        from plangate.records.cards import CARDS_MEMO, CardsMemo, trusted
        from plangate.records.placement import of_deployment, visibility_clause

        queue = self.settings.temporal.task_queue
        query = (f'((WorkflowType="{PLAN_RUN}" AND {visibility_clause(queue)}) OR '
                 f'{visibility.GUARDED}) AND ExecutionStatus="Running"')
        by_memo = await self.search_attributes_registered()
        if by_memo:
            query += f" AND {visibility.AWAITING_APPROVAL.name} = true"
        cards: list[PendingCard] = []
        ask: list[str] = []  # runs whose report is read
        listed = 0
        truncated = False
        limit = PENDING_LIST_MAX if by_memo else PENDING_RUNS_MAX
        async for wf in self.client.list_workflows(query, limit=limit + 1):
            if wf.workflow_type == PLAN_RUN and not of_deployment(wf.task_queue, queue):
                continue
            listed += 1
            if listed > limit:
                truncated, listed = True, limit
                break
            memo: CardsMemo | None = None
            if by_memo:
                try:
                    memo = await wf.memo_value(CARDS_MEMO, None, type_hint=CardsMemo)
                except Exception:  # not a memo this code reads (or cannot decode): ask the run
                    memo = None
            records = trusted(memo, wf.id, wf.run_id) if memo is not None else None
            if memo is not None and records is not None:
                cards += [PendingCard(run_id=wf.id, goal=memo.goal, record=a) for a in records]
            else:
                ask.append(wf.id)
        if len(ask) > PENDING_RUNS_MAX:
            truncated, ask = True, ask[:PENDING_RUNS_MAX]
        at_once = asyncio.Semaphore(_PENDING_QUERIES_AT_ONCE)

        async def read(run_id: str) -> RunReport | Exception | None:
            async with at_once:
                try:
                    rep: RunReport = await self.handle(run_id).query(
                        REPORT_QUERY, result_type=RunReport, rpc_timeout=PENDING_QUERY_TIMEOUT
                    )
                    return rep
                except RPCError as e:
                    # not begun (queued), or ended since it was listed: no card waits
                    gone = (RPCStatusCode.FAILED_PRECONDITION, RPCStatusCode.NOT_FOUND)
                    return None if e.status in gone else e
                except Exception as e:  # a query the worker failed: the run is unreadable
                    return e

        reports = await asyncio.gather(*(read(r) for r in ask))
        unanswered: list[str] = []
        for run_id, rep in zip(ask, reports, strict=True):
            if isinstance(rep, Exception):
                unanswered.append(run_id)
            elif rep is not None and not rep.status.final:
                cards += [
                    PendingCard(run_id=run_id, goal=rep.goal, record=a)
                    for a in rep.approvals
                    if a.status is CardStatus.PENDING and a.plan_version == rep.plan_version
                ]
        cards.sort(key=lambda c: (c.record.expires_at, c.run_id, c.record.step))
        return PendingApprovals(
            cards=cards, runs=listed, unanswered=unanswered, truncated=truncated, asked=len(ask)
        )

    async def wait_for_card(
        # a deadline of its own, as the docs promise (not the caller's asyncio.timeout)
        self, run_id: str, step: int | None = None, *, timeout: float = 300.0,  # noqa: ASYNC109
        every_s: float = 0.25,
    ) -> ApprovalRecord:
        """The approval card of ``run_id`` waiting for a person (of ``step``, or any step),
        once there is one: its ``step``, ``digest`` (what ``approve`` takes), ``card`` and
        ``expires_at``. ``RunEnded`` when the run ends first; ``TimeoutError`` after
        ``timeout`` seconds."""
        import asyncio  # loaded by a call, not by the import: checking a plan needs none
        from contextlib import aclosing

        async def first() -> ApprovalRecord:
            async with aclosing(self.poll(run_id, every_s)) as reports:
                async for rep in reports:
                    for a in rep.approvals:
                        pending = a.status is CardStatus.PENDING
                        if pending and a.plan_version == rep.plan_version and (
                            step is None or a.step == step
                        ):
                            return a
                    if rep.status.final:
                        which = "" if step is None else f" of step {step}"
                        raise RunEnded(f"run {run_id!r} ended ({rep.status.value}) with no "
                                       f"card{which} waiting")
            raise RunEnded(f"run {run_id!r} ended with no card waiting")

        try:
            return await asyncio.wait_for(first(), timeout)
        except TimeoutError:
            which = "" if step is None else f" of step {step}"
            raise TimeoutError(
                f"no card{which} of run {run_id!r} waited within {timeout:g} s"
            ) from None

    def handle(self, run_id: str) -> WorkflowHandle[Any, RunReport]:
        """The run's Temporal workflow handle, for what this API does not cover."""
        return self.client.get_workflow_handle(run_id, result_type=RunReport)

    async def _describe(self, run_id: str) -> WorkflowExecutionStatus | None:
        return (await self._description(run_id)).status

    async def _description(self, run_id: str) -> WorkflowExecutionDescription:
        from temporalio.service import RPCError, RPCStatusCode

        try:
            return await self.handle(run_id).describe()
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                raise UnknownRun(
                    f"no run with id {run_id!r} in namespace {self.settings.temporal.namespace}"
                ) from None
            raise

    async def task_queue_of(self, run_id: str) -> str:
        """The task queue of the run's latest execution (``UnknownRun`` when there is none): one
        of the deployment's catalogue queues (``plangate.records.placement.of_deployment``)."""
        return (await self._description(run_id)).task_queue

    async def of_this_deployment(self, run_id: str) -> bool:
        """Whether the run is on this client's task queue or one of its catalogue queues (or a
        team's workflow plangate guards)."""
        from plangate.records import visibility
        from plangate.records.placement import of_deployment

        desc = await self._description(run_id)
        if desc.workflow_type != PLAN_RUN:
            # a team's workflow whose activities plangate guards: on the team's queue, listed
            # by the attributes its guard sets (``plangate.temporal``)
            return desc.typed_search_attributes.get(visibility.STATUS) is not None
        return of_deployment(desc.task_queue, self.settings.temporal.task_queue)

    async def report(self, run_id: str) -> RunReport:
        """The run report now, of a queued, running or ended run."""
        from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError
        from temporalio.service import RPCError, RPCStatusCode

        desc = await self._description(run_id)
        status = desc.status
        handle = self.handle(run_id)
        # a team's workflow guarded by plangate.temporal: its result is its own, its report the
        # guard's (the report query, answered by its worker)
        own = desc.workflow_type == PLAN_RUN
        if status == WorkflowExecutionStatus.COMPLETED and own:
            return await handle.result()
        if status == WorkflowExecutionStatus.FAILED and own:
            ended = await self._failed_report(run_id)
            if ended is not None:  # the run's own report, read with no worker
                return ended
        try:
            rep: RunReport = await handle.query(
                REPORT_QUERY, result_type=RunReport, rpc_timeout=REPORT_QUERY_TIMEOUT
            )
        except WorkflowQueryFailedError:
            if status != WorkflowExecutionStatus.FAILED:
                raise
            # failed with no report to answer with (its input refused): the history says why
            return await self._queued(run_id)
        except RPCError as e:
            never_began = status == WorkflowExecutionStatus.TERMINATED
            if e.status != RPCStatusCode.FAILED_PRECONDITION and not never_began:
                timed_out = (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED)
                if e.status in timed_out or "timeout" in str(e).lower():
                    said = status.name.lower() if status is not None else "unknown"
                    raise NoWorkerAnswered(
                        f"no worker answered the report query of run {run_id!r} within "
                        f"{REPORT_QUERY_TIMEOUT.total_seconds():g} s (is a worker polling task "
                        f"queue {desc.task_queue}?); Temporal's execution status: {said}",
                        said,
                    ) from None
                raise
            return await self._queued(run_id)  # no workflow task (yet): it has not begun
        # a team's guarded workflow fails its execution when it halts or is cancelled: the
        # status its report ended with says which (Temporal's says only "failed")
        ended_as_said = not own and rep.status.final
        if status is not None and status.name in _CLOSED_STATUS and not ended_as_said:
            rep.status = _CLOSED_STATUS[status.name]
        return rep

    async def _end_of(self, run_id: str) -> str:
        """How an ended run ended, in plangate's words (its report's status, not Temporal's
        execution status): ``succeeded``, ``cancelled before it started (reason)``."""
        from temporalio.client import WorkflowExecutionStatus
        from temporalio.service import RPCError

        try:
            desc = await self._description(run_id)
            rep = await self.report(run_id)
        except (RPCError, RunError) as e:  # no report to read (no worker answered)
            return f"its report cannot be read ({_one_line(e)})"
        said = rep.status.value
        if rep.status is RunStatus.CANCELLED:
            never_began = desc.status == WorkflowExecutionStatus.TERMINATED and all(
                s.attempts == 0 and s.state is StepState.CANCELLED for s in rep.steps
            )
            said = "cancelled before it started" if never_began else "cancelled"
            why = rep.cancellation.reason if rep.cancellation else ""
            if why:
                said += f" ({why})"
        return said

    async def _queued(self, run_id: str) -> RunReport:
        """The report of a run that has not begun: its plan, every step pending (cancelled,
        when it was cancelled before it began; void, with the failure as its escalation, when
        it failed with no report, such as a run whose input the worker refused)."""
        from temporalio.api.enums.v1 import EventType

        from plangate.records.run import CancelRequest, RunInput

        handle = self.handle(run_id)
        desc = await handle.describe()
        inp: RunInput | None = None
        cancellation: Cancellation | None = None
        failed: str | None = None
        convert = self.client.data_converter
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                payloads = event.workflow_execution_started_event_attributes.input.payloads
                (inp,) = await convert.decode(payloads, [RunInput])
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
                failure = event.workflow_execution_failed_event_attributes.failure
                error = await convert.decode_failure(failure)
                failed = f"the run failed with no report: {getattr(error, 'message', error)}"
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
                details = event.workflow_execution_terminated_event_attributes.details.payloads
                req: CancelRequest | None = None
                with contextlib.suppress(Exception):  # details not plangate's: none to read
                    (req,) = await convert.decode(details, [CancelRequest]) if details else (None,)
                # terminated by other means (Temporal's CLI or Web UI): its reason, no requester
                terminated = event.workflow_execution_terminated_event_attributes
                cancellation = Cancellation(
                    reason=req.reason if req is not None else terminated.reason,
                    requester=req.requester if req is not None else terminated.identity,
                    at=event.event_time.ToDatetime(UTC),
                )
        if inp is None:
            raise UnknownRun(f"run {run_id!r} has no history")
        plan = inp.plan
        from plangate.activities.catalogue import catalogue

        cat = catalogue(self.settings.catalogue)
        ended = cancellation is not None or failed is not None
        status, state = RunStatus.QUEUED, StepState.PENDING
        if cancellation is not None:
            status, state = RunStatus.CANCELLED, StepState.CANCELLED
        elif failed is not None:
            status, state = RunStatus.FAILED, StepState.VOID
        return RunReport(
            run_id=run_id, goal=plan.goal, replans_max=plan.budget.replans_max,
            status=status, escalation=failed,
            starts_at=None if ended else desc.execution_time, cancellation=cancellation,
            steps=[
                StepReport(
                    n=s.n, tool=s.tool, plan_version=1, effect=cat.effect_of(s.tool, s.effect),
                    state=state,
                    timings=StepTimings(plan_made_at=inp.plan_made_at or desc.start_time),
                )
                for s in plan.steps
            ],
        )

    async def _failed_report(self, run_id: str) -> RunReport | None:
        """The report a failed run ended its execution with, if it did."""
        from temporalio.client import WorkflowFailureError

        try:
            await self.handle(run_id).result()
        except WorkflowFailureError as e:
            return ended_report(e)
        return None

    async def result(self, run_id: str) -> RunReport:
        """The run report once the run has ended (waits)."""
        from temporalio.client import WorkflowFailureError

        await self._describe(run_id)
        try:
            return await self.handle(run_id).result()
        except WorkflowFailureError as e:
            # halted, failed or cancelled: the report is the failure's details
            rep = ended_report(e)
            if rep is not None:
                return rep
            return await self.report(run_id)
        except Exception:
            # cancelled or failed in Temporal: the report is still there to read
            return await self.report(run_id)

    async def poll(self, run_id: str, every_s: float = 0.5) -> AsyncGenerator[RunReport, None]:
        """The run report every ``every_s`` seconds (from the run's ``report`` query) until the
        run ends; the last one is the final report. A run that has not begun yet is shown
        queued."""
        import asyncio  # loaded by a call, not by the import: checking a plan needs none

        from temporalio.service import RPCError, RPCStatusCode

        await self._describe(run_id)  # an unknown run: UnknownRun, at once
        final = asyncio.ensure_future(self.result(run_id))
        try:
            while not final.done():
                rep: RunReport | None
                try:
                    rep = await self.handle(run_id).query(REPORT_QUERY, result_type=RunReport)
                except RPCError as e:  # not begun yet (queued), or no worker answered
                    begun = e.status != RPCStatusCode.FAILED_PRECONDITION
                    rep = None if begun else await self._queued_or_none(run_id)
                if rep is not None:
                    yield rep
                await asyncio.wait([final], timeout=every_s)
            yield final.result()
        finally:
            final.cancel()

    async def _queued_or_none(self, run_id: str) -> RunReport | None:
        from temporalio.service import RPCError

        try:
            return await self._queued(run_id)
        except (RPCError, UnknownRun):
            return None

    async def watch(self, run_id: str, every_s: float = 0.5) -> AsyncIterator[RunReport]:
        """Each new state of the run report (a step changed state, the status changed), until
        the run ends; the last one is the final report."""
        seen: Any = None
        async for rep in self.poll(run_id, every_s):
            now = (rep.status, [(s.plan_version, s.n, s.state) for s in rep.steps])
            if now != seen or rep.status.final:
                seen = now
                yield rep

    async def cancel(self, run_id: str, reason: str = "", requester: str = "") -> None:
        """Stop a run: no step is dispatched after it, and the reason is in its report."""
        from temporalio.client import WorkflowExecutionStatus

        from plangate.records.run import CancelRequest

        status = await self._describe(run_id)
        if status not in (None, WorkflowExecutionStatus.RUNNING):
            raise RunEnded(f"run {run_id!r} has already ended: {await self._end_of(run_id)}")
        request = CancelRequest(reason=reason, requester=requester)
        if (await self.report(run_id)).status is RunStatus.QUEUED:
            # it has not begun (a signal would wait for its start): it never will
            await self.handle(run_id).terminate(
                request, reason=f"cancelled before it started: {reason or 'no reason given'}"
            )
            return
        await self.handle(run_id).signal(CANCEL_SIGNAL, request)
