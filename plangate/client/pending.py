"""The cards waiting for a person across the open runs of a task queue, as the approval page
lists them: from the memos of the runs awaiting approval where the namespace can find them,
else from each open run's report."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from plangate.client.handles import handle
from plangate.records import visibility
from plangate.records.approvals import ApprovalRecord, CardStatus
from plangate.records.cards import CARDS_MEMO, CardsMemo, trusted
from plangate.records.interface import PLAN_RUN, REPORT_QUERY
from plangate.records.placement import of_deployment, visibility_clause
from plangate.records.report import RunReport

PENDING_RUNS_MAX = 500  # runs whose report is read for one listing of pending cards
PENDING_LIST_MAX = 10_000  # runs awaiting approval listed with their memos
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


def _waiting(run_id: str, rep: RunReport) -> list[PendingCard]:
    return [
        PendingCard(run_id=run_id, goal=rep.goal, record=a)
        for a in rep.approvals
        if a.status is CardStatus.PENDING and a.plan_version == rep.plan_version
    ]


def pending_query(queue: str, by_memo: bool) -> str:
    """The open runs of ``queue`` (and guarded team workflows) that may hold cards; ``by_memo``:
    only those awaiting approval (found by plangate's search attributes)."""
    query = (f'((WorkflowType="{PLAN_RUN}" AND {visibility_clause(queue)}) OR '
             f'{visibility.GUARDED}) AND ExecutionStatus="Running"')
    if by_memo:
        query += f" AND {visibility.AWAITING_APPROVAL.name} = true"
    return query


async def pending_approvals(client: Client, queue: str, by_memo: bool) -> PendingApprovals:
    """``by_memo``: the namespace has plangate's search attributes (the runs awaiting
    approval are found by them, their cards read from their memos)."""
    query = pending_query(queue, by_memo)
    cards: list[PendingCard] = []
    ask: list[str] = []  # runs whose report is read
    listed = 0
    truncated = False
    limit = PENDING_LIST_MAX if by_memo else PENDING_RUNS_MAX
    async for wf in client.list_workflows(query, limit=limit + 1):
        if wf.workflow_type == PLAN_RUN and not of_deployment(wf.task_queue, queue):
            continue
        if wf.workflow_type != PLAN_RUN and not visibility.answers_to(
            wf.typed_search_attributes.get(visibility.GOAL), queue
        ):
            continue  # a team's guarded workflow of another deployment
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
                rep: RunReport = await handle(client, run_id).query(
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
            cards += _waiting(run_id, rep)
    cards.sort(key=lambda c: (c.record.expires_at, c.run_id, c.record.step))
    return PendingApprovals(
        cards=cards, runs=listed, unanswered=unanswered, truncated=truncated, asked=len(ask)
    )
