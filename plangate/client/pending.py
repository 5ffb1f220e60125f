"""The cards waiting for a person across the open runs of a task queue, as the approval page
lists them: from plangate's runs index where the deployment's Postgres is given and the index
holds as many runs awaiting approval as Temporal counts (``client.indexed``); else from the
memos of the runs awaiting approval where the namespace can find them, else from each open
run's report."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio.api.common.v1 import Payload
from temporalio.api.workflow.v1 import WorkflowExecutionInfo
from temporalio.client import Client
from temporalio.converter import decode_typed_search_attributes
from temporalio.service import RPCError, RPCStatusCode

from plangate.client.handles import handle
from plangate.client.paging import PAGE, memo_payloads, pages
from plangate.records import visibility
from plangate.records.approvals import ApprovalRecord, CardStatus
from plangate.records.cards import CARDS_MEMO, CardsMemo, trusted
from plangate.records.interface import PLAN_RUN, REPORT_QUERY
from plangate.records.placement import of_deployment, visibility_clause
from plangate.records.report import RunReport
from plangate.world.clients import World

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
    indexed: int = 0  # runs whose cards came from the runs index
    # runs the index lacked, showed otherwise, or showed awaiting approval where Temporal did
    # not: every run was then read from Temporal
    behind: int = 0
    note: str | None = None  # why the runs were read from Temporal, not the index


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


def plan_runs_awaiting(queue: str) -> str:
    """The plan runs of ``queue`` awaiting approval: what the runs index holds, counted."""
    return (f'WorkflowType="{PLAN_RUN}" AND {visibility_clause(queue)} AND '
            f'ExecutionStatus="Running" AND {visibility.AWAITING_APPROVAL.name} = true')


GUARDED_AWAITING = (f'{visibility.GUARDED} AND ExecutionStatus="Running" AND '
                    f'{visibility.AWAITING_APPROVAL.name} = true')


@dataclass
class Found:
    """What a listing found: cards, the runs to ask, how many runs it listed, each plan run's
    pending digests (to say how far the index was behind)."""

    cards: list[PendingCard] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)
    listed: int = 0
    truncated: bool = False
    digests: dict[str, frozenset[str]] = field(default_factory=dict)
    indexed: int = 0  # runs whose cards came from the runs index


async def pending_approvals(
    client: Client, queue: str, by_memo: bool, *, page_size: int = PAGE,
    index: World | None = None,
) -> PendingApprovals:
    """``by_memo``: the namespace has plangate's search attributes (the runs awaiting
    approval are found by them, their cards read from their memos). The listing is read as the
    server sends its pages (``paging.pages``, the next page asked for while this one is
    read), and of each execution only what the list needs is decoded: its cards memo, a page's
    at once, and a guarded team workflow's goal (the SDK's ``list_workflows`` decoded every
    search attribute and memo of every execution: more than half the client's time)."""
    note, behind, rows = None, 0, None
    if index is not None and by_memo:
        from plangate.client import indexed

        got = await indexed.cards(client, index, queue, page_size)
        if isinstance(got, Found):
            return await _answered(client, got, indexed=got.indexed)
        note, rows = got
    found = await listing(client, pending_query(queue, by_memo), queue, by_memo, page_size)
    if rows is not None:
        from plangate.client import indexed

        behind = indexed.behind(rows, found.digests)
    return await _answered(client, found, behind=behind, note=note)


async def listing(client: Client, query: str, queue: str, by_memo: bool, page_size: int
                  ) -> Found:
    """The runs ``query`` lists: their cards from their memos (``by_memo``), or to be asked."""
    found = Found()
    limit = PENDING_LIST_MAX if by_memo else PENDING_RUNS_MAX
    async for page in pages(client, query, page_size):
        rows = [e for e in page if _ours(e, queue)]
        if found.listed + len(rows) > limit:
            found.truncated, rows = True, rows[: limit - found.listed]
        found.listed += len(rows)
        memos = await _memos(client, rows) if by_memo else [None] * len(rows)
        for e, memo in zip(rows, memos, strict=True):
            ex = e.execution
            records = trusted(memo, ex.workflow_id, ex.run_id) if memo is not None else None
            if memo is not None and records is not None:
                found.cards += [PendingCard(run_id=ex.workflow_id, goal=memo.goal, record=a)
                                for a in records]
                if e.type.name == PLAN_RUN:
                    found.digests[ex.workflow_id] = frozenset(a.digest for a in records)
            else:
                found.ask.append(ex.workflow_id)
        if found.truncated:
            break
    return found


async def _answered(client: Client, found: Found, *, indexed: int = 0, behind: int = 0,
                    note: str | None = None) -> PendingApprovals:
    """The cards found, with those of the runs to ask read from their reports."""
    cards, ask, truncated = found.cards, found.ask, found.truncated
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
        cards=cards, runs=found.listed, unanswered=unanswered, truncated=truncated,
        asked=len(ask), indexed=indexed, behind=behind, note=note,
    )


def _ours(e: WorkflowExecutionInfo, queue: str) -> bool:
    """A run of this deployment, or a team's guarded workflow that answers to it (the listing
    finds guarded workflows whatever their queue: their goal names the deployment)."""
    if e.type.name == PLAN_RUN:
        return of_deployment(e.task_queue, queue)
    goal = decode_typed_search_attributes(e.search_attributes).get(visibility.GOAL)
    return visibility.answers_to(goal, queue)


async def _memos(client: Client, rows: list[WorkflowExecutionInfo]) -> list[CardsMemo | None]:
    """Each execution's cards memo, a page's payloads through the codec at once; None where it
    has none or it is not one this code reads (the run is asked instead)."""
    return [None if p is None else _decoded(client, p)
            for p in await memo_payloads(client, rows, CARDS_MEMO)]


def _decoded(client: Client, p: Payload) -> CardsMemo | None:
    try:
        memo = client.data_converter.payload_converter.from_payload(p, CardsMemo)
    except Exception:  # not a memo this code reads (or cannot decode): ask the run
        return None
    return memo if isinstance(memo, CardsMemo) else None
