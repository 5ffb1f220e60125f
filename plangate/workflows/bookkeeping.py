"""The run report, kept as the run goes: state transitions, checks read, timings, results,
metrics. Deterministic (``workflow.now()``); no decisions are taken here."""

from __future__ import annotations

import json
from datetime import datetime

from pydantic import JsonValue
from temporalio import workflow

from plangate.plans.model import Step
from plangate.records.approvals import CardStatus
from plangate.records.calls import ProbeReport, ToolResult
from plangate.records.report import (
    RECEIPTS_BUDGET,
    RESULTS_BUDGET,
    Answer,
    CallMark,
    CheckRecord,
    LedgerLink,
    Phase,
    Refusal,
    RunReport,
    RunStatus,
    StepReport,
    StepState,
    StepTimings,
    Transition,
    summarize,
)
from plangate.workflows import metrics
from plangate.workflows.router import Refused


def step_shown(report: RunReport, s: Step, version: int, made_at: datetime) -> StepReport:
    """The report's entry of a step of ``version``: added (pending, with the effect its plan
    declares) unless it is there already."""
    try:
        return report.step(s.n, version)
    except KeyError:
        rep = StepReport(
            n=s.n, tool=s.tool, plan_version=version, effect=s.effect,
            timings=StepTimings(plan_made_at=made_at),
        )
        report.steps.append(rep)
        return rep


def set_state(rep: StepReport, state: StepState, fold: bool = False) -> None:
    """``fold``: a wait entering its states again (WAITING, VERIFYING, WAITING, ...) counts
    them on the transitions it already has, so a day of reads keeps the report small. A step
    that moves on from waiting no longer shows why it waited (a new answer replaces it)."""
    now = workflow.now()
    if rep.state is StepState.WAITING and state is not StepState.WAITING \
            and rep.answer is Answer.WAIT:
        rep.answer, rep.reason = None, ""
    t = rep.transitions
    again = None
    if fold and t and t[-1].state == state:
        again = t[-1]
    elif fold and len(t) >= 3 and t[-2].state == state and t[-1].state == t[-3].state == rep.state:
        again = t[-2]  # Y, X, Y and X again: X counted once more
    rep.state = state
    if again is None:
        t.append(Transition(state=state, at=now))
    else:
        again.times += 1
        again.last_at = now


def record_check(
    report: RunReport,
    rep: StepReport,
    phase: Phase,
    attempt: int,
    probe: ProbeReport,
    fold: bool = False,
) -> None:
    """``fold``: a wait's later read replaces the record of the read before it, counting it."""
    record = CheckRecord(
        phase=phase, attempt=attempt, results=probe.results,
        read_at=probe.read_at, elapsed_ms=probe.elapsed_ms,
    )
    last = rep.checks[-1] if rep.checks else None
    if fold and last is not None and (last.phase, last.attempt) == (phase, attempt):
        record.reads = last.reads + 1
        record.elapsed_ms += last.elapsed_ms
        rep.checks[-1] = record
    else:
        rep.checks.append(record)
    report.metrics.probe_ms += probe.elapsed_ms
    report.metrics.probes_run += len(probe.results)


def record_call(report: RunReport, rep: StepReport, result: ToolResult, attempt: int) -> None:
    """The call's attempts and timings: the check-to-use and plan-to-use windows. A check made
    at the call is the read the tool acted on: the window begins there."""
    rep.attempts += result.attempt
    t = rep.timings
    if result.checked is not None:
        record_check(report, rep, Phase.AT_CALL, attempt, result.checked)
        t.precheck_read_at = result.checked.read_at
    t.tool_started_at, t.tool_finished_at = result.started_at, result.finished_at
    rep.check_to_use_ms = t.check_to_use_ms
    rep.staleness_ms = t.staleness_ms
    if t.check_to_use_ms is not None:
        report.sample("check_to_use_ms", t.check_to_use_ms)
    if t.staleness_ms is not None:
        report.sample("plan_to_use_ms", t.staleness_ms)
    metrics.windows(rep.tool, t.check_to_use_ms, t.staleness_ms)


def mark_call(rep: StepReport, at: datetime, status: int, code: str, attempts: int) -> None:
    """An answer the step's tool call got, for the staleness report (``records.windows``). A
    failure like the one before it (a tool's outage waited out for days, tried every minute) is
    counted on that mark, so the report stays small; a refusal (403, 409, 412: a change seen)
    always has its own."""
    last = rep.calls[-1] if rep.calls else None
    if last is not None and status not in (200, 403, 409, 412) \
            and (last.status, last.code) == (status, code):
        last.attempts += max(1, attempts)
        return
    rep.calls.append(CallMark(at=at, status=status, code=code, attempts=max(1, attempts)))


def record_ledger(rep: StepReport, key: str, word: str) -> None:
    """The call's row in the effect ledger, as the tool's activity said (``ToolResult.ledger``)."""
    if word:
        rep.ledger = LedgerLink(key=key, answered=word == "answered", owed=word == "owed")


def record_receipt(report: RunReport, rep: StepReport, receipt: dict[str, JsonValue] | None
                   ) -> None:
    """The effect's signed receipt beside its ledger row, while the run's budget for receipts
    lasts (each is in ``plangate.receipts`` whatever the report keeps)."""
    if receipt is None or rep.ledger is None:
        return
    size = len(json.dumps(receipt, separators=(",", ":"), ensure_ascii=False).encode())
    if report.metrics.receipt_bytes + size <= RECEIPTS_BUDGET:
        report.metrics.receipt_bytes += size
        rep.ledger.receipt = receipt


def count_answer(
    report: RunReport, rep: StepReport, refused: Refused | None, status: int, code: str
) -> None:
    """Refusals (the resource moved, a version superseded, the authority revoked) are the
    staleness rate made countable (seed 002): per run, and per step for the staleness report,
    under the status the tool sent."""
    if refused is None:
        return
    rep.refusals.append(Refusal(status=status, code=code))
    metrics.refusal(rep.tool, status)
    m = report.metrics
    match refused:
        case Refused.CONFLICT:
            m.answers_409 += 1
        case Refused.SUPERSEDED:
            m.answers_412 += 1
        case Refused.REVOKED:
            m.answers_403 += 1


def record_result(report: RunReport, rep: StepReport, output: dict[str, JsonValue]) -> None:
    """Keep a bounded view of a tool's result in the report: the whole result while it is
    small and the run's budget for results lasts, else its size, SHA-256 and a preview.
    The full result is stored once, in the history, as the activity's result."""
    summary = summarize(output, report.metrics.result_bytes < RESULTS_BUDGET)
    rep.result = summary.value
    rep.result_digest = summary.digest
    report.metrics.result_bytes += summary.kept


def refresh_status(report: RunReport) -> None:
    """A running run waits for a person while any card is pending."""
    if report.status not in (RunStatus.RUNNING, RunStatus.AWAITING_APPROVAL):
        return
    pending = any(a.status is CardStatus.PENDING for a in report.approvals)
    report.status = RunStatus.AWAITING_APPROVAL if pending else RunStatus.RUNNING
