"""``plangate report``: finished runs fetched through Temporal's visibility, then the
staleness report (``plangate.client.staleness``) as text, JSON or an HTML page."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from temporalio.api.common.v1 import Payload
from temporalio.api.workflow.v1 import WorkflowExecutionInfo
from temporalio.client import Client, WorkflowFailureError

from plangate.client.paging import PAGE as PAGE  # re-exported: the listing moved there
from plangate.client.paging import memo_payloads
from plangate.client.paging import pages as pages
from plangate.client.reports import ended_report
from plangate.client.staleness import Finished, ToolStaleness, bound, duration, plain
from plangate.plans.words import many
from plangate.records.interface import PLAN_RUN
from plangate.records.placement import visibility_clause
from plangate.records.policy import Outcome
from plangate.records.report import RunReport
from plangate.records.visibility import GUARDED
from plangate.records.windows import WINDOWS_MEMO, RunWindows, own
from plangate.world.settings import parse_duration

if TYPE_CHECKING:
    from plangate.world.decisions import Recorded

FETCH_AT_ONCE = 32


def _stamp(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def query(since: datetime, task_queue: str | None, *, until: datetime | None = None,
          plan_runs: bool = True, guarded: bool = True) -> str:
    """Runs closed after ``since``: plan runs (closed at or before ``until`` where given) and
    the team workflows plangate guards (either left out with ``plan_runs`` or ``guarded``
    False)."""
    # a run that did not succeed fails its execution, with its report (``truthful-end``)
    ran = f'WorkflowType="{PLAN_RUN}"'
    if task_queue is not None:
        if '"' in task_queue or "\\" in task_queue:
            raise ValueError(f"task queue {task_queue!r}: quotes and backslashes not allowed")
        ran += f" AND {visibility_clause(task_queue)}"  # and its catalogue queues
    if until is not None:
        ran += f' AND CloseTime <= "{_stamp(until)}"'
    # and the team workflows plangate guards (``plangate.temporal``), whatever their queue
    if not (plan_runs or guarded):
        raise ValueError("a query for no runs")
    which = (f"(({ran}) OR {GUARDED})" if plan_runs and guarded
             else f"({ran})" if plan_runs else GUARDED)
    return (f'{which} AND ExecutionStatus IN ("Completed", "Failed") '
            f'AND CloseTime > "{_stamp(since)}"')


async def finished_runs(
    client: Client, since: datetime, task_queue: str | None = None, *, page_size: int = PAGE,
) -> list[Finished]:
    """Every plan run that completed after ``since`` (on ``task_queue`` and its catalogue
    queues; None: any), with its tool calls' windows: read from the memo the run wrote as it
    ended (``records.windows``), in the listing itself; for a run with no such memo (begun
    before runs wrote one, or one it did not write), from its result, fetched. The last run of
    a chain that continued as new carries the whole report."""
    return [f for _, f in await listed(client, query(since, task_queue), task_queue, page_size)]


async def listed(client: Client, q: str, task_queue: str | None, page_size: int = PAGE
                 ) -> list[tuple[str, Finished]]:
    """The finished runs visibility lists for ``q``, each with its execution's run id."""
    gate = asyncio.Semaphore(FETCH_AT_ONCE)

    async def fetched(e: WorkflowExecutionInfo) -> tuple[str, Finished] | None:
        ex = e.execution
        if e.type.name != PLAN_RUN:  # a team's workflow: its result is its own, not a report
            return None
        async with gate:
            handle = client.get_workflow_handle(ex.workflow_id, run_id=ex.run_id,
                                                result_type=RunReport)
            try:
                rep = await handle.result(follow_runs=False)
            except WorkflowFailureError as err:
                ended = ended_report(err)
                if ended is None:  # failed with no report (its input refused): nothing ran
                    return None
                rep = ended
        started = e.start_time.ToDatetime(UTC)
        submitted = rep.submitted_at or started
        begun = rep.begun_at or (e.execution_time.ToDatetime(UTC)
                                 if e.HasField("execution_time") else submitted)
        return ex.run_id, Finished.of(rep, submitted, begun)

    out: list[tuple[str, Finished]] = []
    fetch: list[WorkflowExecutionInfo] = []

    async for page in pages(client, q, page_size):
        for e, memo in zip(page, await _memos(client, page), strict=True):
            if memo is None:
                fetch.append(e)
            elif not _elsewhere(memo, task_queue):
                out.append((memo.execution, Finished(memo.run_id, memo.status, memo.calls)))
    return out + [f for f in await asyncio.gather(*(fetched(e) for e in fetch)) if f is not None]


def _elsewhere(memo: RunWindows, task_queue: str | None) -> bool:
    """A team's guarded run of another deployment (the listing finds guarded team runs
    whatever their queue; their memo names the deployment they answer to)."""
    return task_queue is not None and memo.deployment not in (None, task_queue)


async def _memos(client: Client, page: list[WorkflowExecutionInfo]) -> list[RunWindows | None]:
    """Each execution's own windows memo, a page's payloads decoded at once; None where it has
    none or it does not decode (the result is fetched instead)."""
    return [None if p is None else _decoded(client, e, p)
            for e, p in zip(page, await memo_payloads(client, page, WINDOWS_MEMO),
                            strict=True)]


async def _windows(client: Client, e: WorkflowExecutionInfo) -> RunWindows | None:
    """The windows the execution itself wrote, or None."""
    return (await _memos(client, [e]))[0]


def _decoded(client: Client, e: WorkflowExecutionInfo, p: Payload) -> RunWindows | None:
    try:
        memo = client.data_converter.payload_converter.from_payload(p, RunWindows)
    except Exception:  # not one this code reads: fetch the result
        return None
    if not isinstance(memo, RunWindows):
        return None
    return own(memo, e.execution.workflow_id, e.execution.run_id)


def since_arg(raw: str, now: datetime) -> datetime:
    """``7d``, ``12h``, ``90m``: that long before ``now``."""
    return now - timedelta(seconds=parse_duration(raw, "--since"))


def _h(x: float) -> str:
    return duration(x)  # with its unit, 0 too: "0 s"


def _e(x: float) -> str:
    return plain(x)


def text(tools: list[ToolStaleness], runs: int, since: datetime) -> list[str]:
    stamp = since.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    calls = sum(t.volume for t in tools)
    lines = [f"staleness since {stamp}: {many(runs, 'finished run')}, "
             f"{many(calls, 'tool call')}",
             ("E = W x R x V, the calls expected to act on a changed world: W the window, R the "
              "changes per hour, V the calls; W plan->use (unguarded) and check->use (guarded)")]
    head = (f"{'tool':22} {'V':>5} {'W plan p50/p95':>19} {'W check p50/p95':>19} "
            f"{'approval p50':>12} {'R /h':>9} {'E plan p50/p95':>16} {'E check p95':>13} "
            f"{'409':>4} {'412':>4} {'403':>4}")
    lines.append(head)
    for t in tools:
        flag = "!" if t.irreversible else " "
        approval = _h(t.approval_wait_h[0]) if t.approval_wait_h else "-"
        upper = bound(t)
        rate = plain(t.rate_per_h) if t.changes else (
            f"<{plain(upper, 2)}" if upper is not None else "0")
        lines.append(
            f"{flag}{t.tool:21} {t.volume:5} "
            f"{_h(t.plan_to_use_h[0]) + ' / ' + _h(t.plan_to_use_h[1]):>19} "
            f"{_h(t.check_to_use_h[0]) + ' / ' + _h(t.check_to_use_h[1]):>19} "
            f"{approval:>12} {rate:>9} "
            f"{_e(t.e_plan[0]) + ' / ' + _e(t.e_plan[1]):>16} {_e(t.e_check[1]):>13} "
            f"{t.refusals.get(409, 0):4} {t.refusals.get(412, 0):4} {t.refusals.get(403, 0):4}"
        )
    if not tools:
        lines.append(f"no finished runs with tool calls since {stamp}: nothing to report")
    if any(t.irreversible for t in tools):
        lines.append("! irreversible effect (money, external): the stale executions that matter")
    return lines


def policy_lines(rows: list[Recorded], since: datetime) -> list[str]:
    """The deployment's policy decisions since ``since`` (``world.decisions``): refusals,
    calls that asked for people, and each call shadow mode would have refused."""
    stamp = since.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    refused = _steps(r for r in rows if r.outcome is Outcome.FORBID and r.enforced)
    shadow = [r for r in rows if r.would_refuse]
    people = _steps(r for r in rows if r.outcome is Outcome.PERMIT_WITH_PEOPLE)
    lines = [f"policy decisions since {stamp}, in steps: refused (policy_denied) {refused}, "
             f"would have been refused (shadow) {_steps(shadow)}, asked for people {people}"]
    for r in shadow:
        where = "at the call" if r.at_call else "at the guards"
        lines.append(f"  would refuse: {r.run_id} step {r.step} {r.tool} ({where}; "
                     f"{', '.join(r.policies) or 'default deny'}; {r.bundle})")
    return lines


def _steps(rows: Iterable[Recorded]) -> int:
    """How many steps ``rows`` decided (a step is decided at its guards and at its call)."""
    return len({(r.run_id, r.plan_version, r.step) for r in rows})


def policy_json(rows: list[Recorded]) -> dict[str, object]:
    return {
        "refused": _steps(r for r in rows if r.outcome is Outcome.FORBID and r.enforced),
        "asked_for_people": _steps(r for r in rows
                                   if r.outcome is Outcome.PERMIT_WITH_PEOPLE),
        "would_refuse": [
            {"run_id": r.run_id, "plan_version": r.plan_version, "step": r.step,
             "tool": r.tool, "policies": list(r.policies), "bundle": r.bundle,
             "at_call": r.at_call, "decided_at": r.decided_at.isoformat()}
            for r in rows if r.would_refuse],
    }
