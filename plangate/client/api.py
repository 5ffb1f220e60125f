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
import importlib
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from plangate.client.errors import *  # noqa: F403 (what a caller catches, at home here too)
from plangate.records.approvals import (
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalReceipt,
    ApprovalRecord,
)
from plangate.records.interface import APPROVE_UPDATE, REJECT_UPDATE
from plangate.records.report import RunReport, RunStatus
from plangate.world.settings import Settings

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowHandle

    from plangate.client.checked import Checked, PlanSource
    from plangate.client.listings import Listed, RunsListing, runs_query
    from plangate.client.pending import PendingApprovals, PendingCard
    from plangate.client.reports import ended_report
    from plangate.plans.model import Plan
    from plangate.records.grants import Grant
    from plangate.records.signing import SigningKey
    from plangate.replanner.planner import Draft
    from plangate.world.clients import World
    from plangate.world.grants import Listed as ListedGrant

__all__ = ["Listed", "PendingApprovals", "PendingCard", "Plangate", "ended_report", "runs_query"]

# Where the names this module held live now; they load on first use, with Temporal's client.
_MOVED = {
    "Listed": "plangate.client.listings",
    "runs_query": "plangate.client.listings",
    "PendingApprovals": "plangate.client.pending",
    "PendingCard": "plangate.client.pending",
    "ended_report": "plangate.client.reports",
}


def __getattr__(name: str) -> Any:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


class Plangate:
    """A client of plangate runs on one Temporal namespace and task queue: a front over
    ``starting``, ``answers``, ``reports``, ``following``, ``listings`` and ``pending``. Each
    method loads its module on its first call (with Temporal's client), not with the import:
    checking a plan needs none of them."""

    def __init__(self, client: Client, settings: Settings, *, index: World | None = None
                 ) -> None:
        """``index``: the deployment's Postgres, where the card list and ``runs`` read
        plangate's runs index first (``client.indexed``); None: Temporal's visibility alone."""
        self.client = client
        self.settings = settings
        self.index = index
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
        from plangate.client import starting

        return await starting.submit(
            self.client, self.settings, await self.search_attributes_registered(), source,
            run_id=run_id, start_at=start_at, start_in=start_in, once=once, fresh_id=fresh_id,
            memo=memo,
        )

    async def queue_for(self, plan: Plan) -> str:
        """The task queue a run of ``plan`` starts on: that of a polling worker whose catalogue
        has every tool and probe it names (``plangate.client.placement.choose``), else, with no
        worker announcing, that of this client's own catalogue. ``NoCapableWorker`` when
        workers poll and none can run it; a queued run is placed the same way, now."""
        from plangate.client import starting

        return await starting.queue_for(self.client, self.settings, plan)

    async def cancel(self, run_id: str, reason: str = "", requester: str = "") -> None:
        """Stop a run: no step is dispatched after it, and the reason is in its report. A run
        that has not begun is ended at once; one whose worker is gone takes the cancel when a
        worker returns; ``RunEnded`` (naming how) once it has ended."""
        from plangate.client import starting

        await starting.cancel(self.client, self.settings, run_id, reason, requester)

    def handle(self, run_id: str) -> WorkflowHandle[Any, RunReport]:
        """The run's Temporal workflow handle, for what this API does not cover."""
        from plangate.client.handles import handle

        return handle(self.client, run_id)

    async def task_queue_of(self, run_id: str) -> str:
        """The task queue of the run's latest execution (``UnknownRun`` when there is none): one
        of the deployment's catalogue queues (``plangate.records.placement.of_deployment``)."""
        from plangate.client.handles import description

        return (await description(self.client, run_id)).task_queue

    async def of_this_deployment(self, run_id: str) -> bool:
        """Whether the run is on this client's task queue or one of its catalogue queues (or a
        team's workflow plangate guards)."""
        from plangate.client.handles import of_deployment

        return await of_deployment(self.client, run_id, self.settings.temporal.task_queue)

    # -- reports ------------------------------------------------------------------------------
    async def report(self, run_id: str) -> RunReport:
        """The run report now, of a queued, running or ended run: the run's own (its report
        query, or what it ended with). ``NoWorkerAnswered`` when a running run's worker does
        not answer within ``REPORT_QUERY_TIMEOUT``."""
        from plangate.client import reports

        return await reports.report(self.client, self.settings, run_id)

    async def result(self, run_id: str) -> RunReport:
        """The run report once the run has ended (waits)."""
        from plangate.client import reports

        return await reports.result(self.client, self.settings, run_id)

    async def poll(self, run_id: str, every_s: float = 0.5) -> AsyncGenerator[RunReport, None]:
        """The run report every ``every_s`` seconds (from the run's ``report`` query) until the
        run ends; the last one is the final report. A run that has not begun yet is shown
        queued."""
        from plangate.client import following

        async for rep in following.poll(self.client, self.settings, run_id, every_s):
            yield rep

    async def watch(self, run_id: str, every_s: float = 0.5) -> AsyncIterator[RunReport]:
        """Each new state of the run report (a step changed state, the status changed), until
        the run ends; the last one is the final report."""
        from plangate.client import following

        async for rep in following.watch(self.client, self.settings, run_id, every_s):
            yield rep

    async def wait_for_card(
        # a deadline of its own, as the docs promise (not the caller's asyncio.timeout)
        self, run_id: str, step: int | None = None, *, timeout: float = 300.0,  # noqa: ASYNC109
        every_s: float = 0.25,
    ) -> ApprovalRecord:
        """The approval card of ``run_id`` waiting for a person (of ``step``, or any step),
        once there is one: its ``step``, ``digest`` (what ``approve`` takes), ``card`` and
        ``expires_at``. ``RunEnded`` when the run ends first; ``TimeoutError`` after
        ``timeout`` seconds."""
        from plangate.client import following

        return await following.wait_for_card(
            self.client, self.settings, run_id, step, timeout, every_s
        )

    # -- answers ------------------------------------------------------------------------------
    def approver_key(self, name: str = "") -> SigningKey:
        """The key an answer is signed with: the one named ``name`` among this process's
        approver keys (``PLANGATE_APPROVER_KEY``), else the first."""
        from plangate.client import answers

        return answers.approver_key(self.settings, name)

    async def published_card(self, run_id: str, step: int, digest: str) -> PendingCard:
        """The card of ``step`` run ``run_id`` waits on, fetched from the run, whose digest is
        ``digest``: what an answer to it signs (its ``record.card``: tool, arguments,
        principal, run, step, expiry). ``AnswerRefused`` (nothing signed) when the run is not a
        plangate run of this deployment (a plan run on its task queue or a catalogue queue, or
        a team's workflow guarded for it) or publishes no such card there; ``RunEnded``,
        ``UnknownRun`` as their names say."""
        from plangate.client import shown

        return await shown.published(self.client, self.settings, run_id, step, digest)

    async def approve(
        self, run_id: str, step: int, digest: str, *, by: str = "", at: datetime | None = None,
        shown: PendingCard | None = None,
    ) -> ApprovalReceipt:
        """Approve the card of ``step`` by its digest, signed with the approver key named
        ``by`` (default: the first; ``approver_key``). The card is fetched from the run first
        (``published_card``): a digest the run does not publish for the step, or a workflow
        that is not a plangate run of this deployment, is refused before anything is signed.
        Refused too: no such key, a key the deployment does not know, the run's own
        submitter, an expired card, a second answer; nothing is recorded then. ``at``: the
        time it is signed at (default: now; a time-skipping test server's clock is not this
        machine's). ``shown``: the card this client just fetched for this very answer
        (``published_card``; the CLI shows it first): not fetched again."""
        return await self._answer(run_id, step, digest, ApprovalDecision.APPROVE, "", by, at, shown)

    async def reject(
        self, run_id: str, step: int, digest: str, *, reason: str, by: str = "",
        at: datetime | None = None, shown: PendingCard | None = None,
    ) -> ApprovalReceipt:
        """Reject the card of ``step``: the step follows its ``on_unmet`` (fetched, checked
        and signed as ``approve``)."""
        return await self._answer(run_id, step, digest, ApprovalDecision.REJECT, reason, by, at,
                                  shown)

    async def _answer(
        self, run_id: str, step: int, digest: str, decision: ApprovalDecision, reason: str, by: str,
        at: datetime | None, shown: PendingCard | None = None,
    ) -> ApprovalReceipt:
        from plangate.client import answers

        self.approver_key(by)  # a missing key is said before the run is asked
        fetched = shown is not None and (shown.run_id, shown.record.step,
                                         shown.record.digest) == (run_id, step, digest)
        if not fetched:
            await self.published_card(run_id, step, digest)
        answer = self.signed_answer(run_id, step, digest, decision, reason, by, at)
        update = APPROVE_UPDATE if decision is ApprovalDecision.APPROVE else REJECT_UPDATE
        return await answers.answer(self.client, self.settings, run_id, update, answer)

    def signed_answer(
        self, run_id: str, step: int, digest: str, decision: ApprovalDecision, reason: str = "",
        by: str = "", at: datetime | None = None,
    ) -> ApprovalAnswer:
        """An answer signed with the approver key named ``by`` (``approver_key``): what the
        ``approve`` and ``reject`` Updates take, and what a client that can only signal sends
        as the ``answer`` signal."""
        from plangate.client import answers

        return answers.signed_answer(
            self.settings, run_id, step, digest, decision, reason, by, at
        )

    # -- listings -----------------------------------------------------------------------------
    async def search_attributes_registered(self) -> bool:
        """Whether the namespace has plangate's search attributes, with their types (asked
        once; a server that cannot say, such as the time-skipping test server, has not)."""
        from plangate.client import listings

        if self._registered is None:
            self._registered = await listings.registered(self.client)
        return self._registered

    async def runs(
        self, status: RunStatus | str | None = None, limit: int = 100
    ) -> list[Listed]:
        """The runs on this task queue (in ``status``), newest first (``runs_listing``)."""
        return (await self.runs_listing(status, limit)).runs

    async def runs_listing(
        self, status: RunStatus | str | None = None, limit: int = 100
    ) -> RunsListing:
        """The runs on this task queue (in ``status``), newest first: from the runs index
        where this client has one and it holds as many as Temporal counts, else through
        Temporal's visibility (eventually consistent: a change shows within a second or so),
        with why. ``SearchAttributesMissing`` for a status where the namespace cannot find
        it."""
        from plangate.client import indexed, listings
        from plangate.client.listings import RunsListing

        wanted = RunStatus(status) if status is not None else None
        queue = self.settings.temporal.task_queue
        note = None
        if (self.index is not None and wanted is not RunStatus.QUEUED
                and await self.search_attributes_registered()):
            got = await indexed.runs(self.client, self.index, queue, wanted, limit)
            if not isinstance(got, str):
                return RunsListing(got[0], got[1], None)
            note = got
        registered = wanted is None or await self.search_attributes_registered()
        return RunsListing(
            await listings.runs(self.client, queue, registered, wanted, limit), 0, note)

    # -- standing grants ----------------------------------------------------------------------
    async def issue_grant(
        self, tool: str, principal: str, *, uses: int, expires_in: timedelta,
        equals: Mapping[str, str | int | bool] | None = None,
        at_most: Mapping[str, str] | None = None, prefix: Mapping[str, str] | None = None,
        by: str = "", note: str = "",
    ) -> Grant:
        """A standing grant (``records.grants``), signed with the approver key ``by`` of this
        process (``PLANGATE_APPROVER_KEY``) and kept in the deployment's Postgres: calls of
        ``tool`` for ``principal`` whose arguments keep within ``equals`` (a value),
        ``at_most`` (a number, the tool's amount in its whole units) and ``prefix`` run
        without a card, ``uses`` times, for ``expires_in``. ``BadGrant``: nothing written."""
        from plangate.client import grants

        key = self.approver_key(by)
        t = grants.terms(self.settings.catalogue, key, tool=tool, principal=principal,
                         equals=equals or {}, at_most=at_most or {}, prefix=prefix or {},
                         uses=uses, expires_in=expires_in, note=note)
        async with self._world() as world:
            return await grants.issued(world, key, t)

    async def grants(self, *, live_only: bool = False) -> list[ListedGrant]:
        """The deployment's standing grants, newest first, with the uses each has given."""
        from plangate.world import grants

        async with self._world() as world:
            return await grants.listed(world, live_only=live_only)

    async def revoke_grant(self, grant_id: str, by: str = "") -> datetime:
        """The grant revoked now (it admits no further call, a call it covered and not yet
        made included); its revocation's time. ``BadGrant`` where there is no such grant."""
        from plangate.client import grants

        async with self._world() as world:
            return await grants.revoked(world, grant_id, by or "api")

    @contextlib.asynccontextmanager
    async def _world(self) -> AsyncIterator[World]:
        """The deployment's Postgres: ``index`` where given, else one opened for the call."""
        if self.index is not None:
            yield self.index
            return
        from plangate.world.clients import World

        world = World(self.settings.world)
        try:
            yield world
        finally:
            await world.close()

    async def pending_approvals(self) -> PendingApprovals:
        """The approval cards waiting for a person across the open runs of this task queue,
        the soonest to expire first. Where the namespace has plangate's search attributes, one
        visibility query lists the runs awaiting approval with their memos, which hold their
        cards (``records.cards``); a run whose memo has none it can trust (begun before runs
        kept one, or a memo it did not write) is asked for its report. Elsewhere every open run
        is asked. A run whose report cannot be read in time (no worker polling) is named in
        ``unanswered``; a queued run has no card yet. With ``index``, plangate's runs index is
        read instead of the listing where it holds as many runs awaiting approval as Temporal
        counts (``indexed``); else the listing, and ``behind``, ``note`` say why."""
        from plangate.client import pending

        return await pending.pending_approvals(
            self.client, self.settings.temporal.task_queue,
            await self.search_attributes_registered(), index=self.index,
        )
