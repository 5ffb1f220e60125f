"""Each tool call's windows, as a finished run's memo keeps them for the staleness report
(``plangate report``): computed from the run report by the run's own code as it ends, so that
the report reads them in the visibility listing instead of fetching every run's result.

A memo can also be set by whoever starts a workflow, so one counts only when it names the
execution that holds it (``RunWindows.execution``); otherwise the report fetches the result.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime

from plangate.plans._base import Model
from plangate.plans.model import Effect
from plangate.records.approvals import CardStatus
from plangate.records.report import Attribution, CallMark, RunReport, RunStatus, StepReport

WINDOWS_MEMO = "plangate.windows"
# a memo past this is not written (Temporal warns at 128 KiB): the report fetches the result
WINDOWS_MEMO_MAX = 64 * 1024


class Execution(Model):
    """One call of a tool, its windows in hours and the changes seen under it."""

    tool: str
    effect: Effect
    segments: dict[str, float]  # planning, queue, approval, run, check_to_use
    changes: int
    refusals: dict[int, int]
    checked: bool = True  # a pre check read the world before the call
    calls: int = 1  # the attempts this answer took: each a call of the tool (V counts them)

    @property
    def plan_to_use_h(self) -> float:
        return math.fsum(self.segments.values())  # in any order of the keys (jsonb's)

    @property
    def check_to_use_h(self) -> float:
        """From the pre check's read; with none, nothing shortened the window: all of it."""
        return self.segments["check_to_use"] if self.checked else self.plan_to_use_h


class RunWindows(Model):
    execution: str  # the run id of the execution that wrote it
    run_id: str
    status: RunStatus
    calls: list[Execution]
    # a team's guarded run (``plangate.temporal``): the deployment's task queue its plugin
    # answers to, since the run's own queue is the team's; none for a plan run
    deployment: str | None = None


class WindowsRow(Model):
    """What a run hands the worker as it ends, for its row in Postgres (``world.windows``):
    its status and calls. Which execution and run it is, the worker reads from the activity's
    own info, not from here."""

    status: RunStatus
    calls: list[Execution]


def own(memo: RunWindows, workflow_id: str, run_id: str) -> RunWindows | None:
    """The memo, if the execution ``run_id`` of run ``workflow_id`` wrote it; else None."""
    return memo if memo.execution == run_id and memo.run_id == workflow_id else None


def _hours(a: datetime, b: datetime) -> float:
    return max(0.0, (b - a).total_seconds() / 3600)


def executions(rep: RunReport, submitted_at: datetime, begun_at: datetime) -> list[Execution]:
    """One per answer a step's tool call got (``StepReport.calls``): those that ran, and those
    refused or failed, each with its answer; a report from before calls were marked: one per
    step whose tool started."""
    out = []
    for step in rep.steps:
        marks = step.calls or ([CallMark(at=step.timings.tool_started_at, status=200)]
                               if step.timings.tool_started_at is not None else [])
        for i, mark in enumerate(marks):
            last = i == len(marks) - 1
            out.append(_execution(rep, step, mark, submitted_at, begun_at, last,
                                  marked=bool(step.calls)))
    return out


def _execution(rep: RunReport, step: StepReport, mark: CallMark, submitted_at: datetime,
               begun_at: datetime, last: bool, marked: bool) -> Execution:
    t = step.timings
    started = mark.at
    read = t.precheck_read_at
    checked = read if read is not None and read <= started else started
    cards = [a for a in rep.approvals
             if a.step == step.n and a.plan_version == step.plan_version]
    approval = sum(_hours(a.card.issued_at, a.answer.at) for a in cards
                   if a.answer and a.answer.at <= started)
    planning = _hours(t.plan_made_at, min(submitted_at, started))
    queue = _hours(submitted_at, min(begun_at, started))
    whole = _hours(t.plan_made_at, started)
    check = _hours(checked, started)
    rest = max(0.0, whole - planning - queue - approval - check)
    segments = {"planning": planning, "queue": queue, "approval": approval, "run": rest,
                "check_to_use": check}
    if marked:
        refusals = {mark.status: 1} if mark.status in (403, 409, 412) else {}
        moved = int(mark.status == 409 or (mark.status == 412
                                           and mark.code != "policy_superseded"))
    else:
        refusals, moved = _refusals(step), _moved(step)
    # what the step's end says (a card superseded, a verified state destroyed): its last call's
    changes = moved + (_after(rep, step) if last else 0)
    return Execution(tool=step.tool, effect=step.effect, segments=segments, changes=changes,
                     refusals=refusals, checked=read is not None and read <= started,
                     calls=mark.attempts)


def _refusals(step: StepReport) -> dict[int, int]:
    counts: dict[int, int] = defaultdict(int)
    for r in step.refusals:
        counts[r.status] += 1
    return dict(counts)


def _moved(step: StepReport) -> int:
    return sum(1 for r in step.refusals
               if r.status == 409 or (r.status == 412 and r.code != "policy_superseded"))


def _after(rep: RunReport, step: StepReport) -> int:
    superseded = sum(1 for a in rep.approvals if a.step == step.n
                     and a.plan_version == step.plan_version
                     and a.status is CardStatus.SUPERSEDED)
    f = rep.failure
    destroyed = int(f is not None and f.step == step.n and f.plan_version == step.plan_version
                    and f.attribution is Attribution.DESTROYED)
    return superseded + destroyed
