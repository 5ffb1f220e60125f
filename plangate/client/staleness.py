"""The staleness report: for each action type (a tool), the expected stale executions
E = W x R x V of seed 002, from finished runs' reports.

- **V**: the tool's calls in the period: every time a step sent it, those refused (409, 412,
  403) or failed as well as those that ran (each activity attempt a call).
- **W**: the window in hours, at p50 and p95 (nearest rank), two ways: plan-to-use (the plan
  written -> the tool started: what an unguarded agent is exposed to) and check-to-use (the
  pre check's read -> the tool started: what is left with plangate's guard; a call with no pre
  check keeps its whole plan-to-use window). Plan-to-use is
  split into where its time goes: planning (plan written -> run submitted), queue (a queued
  run's delay), approval (cards issued -> answered), run (earlier steps, waits) and
  check-to-use; the means of the segments add up to the mean window.
- **R**: changes by other writers per hour of exposure, from what plangate saw change under a
  plan: version-bound writes refused because the target moved (409, and 412 but for a
  superseded policy), approved cards superseded because the world moved before the call, and
  steps whose pre check found a state an earlier step had verified gone. Exposure: the sum of
  the tool's plan-to-use windows, the time in which plangate would have seen such a change.
  (A Poisson rate: changes / exposure. None seen in H hours: R is 0, and under 3/H at 95%.)
- **E** = W (h) x R (/h) x V, at p50 and p95, for both windows; ranked by E at p95 of
  plan-to-use, irreversible effects (money, external) flagged.

Pure: no I/O here (``plangate.client.reporting`` fetches the runs).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from plangate.plans.model import Effect
from plangate.records.report import RunReport, RunStatus
from plangate.records.windows import Execution, executions

HOUR_MS = 3_600_000.0
SEGMENTS = ("planning", "queue", "approval", "run", "check_to_use")
IRREVERSIBLE = (Effect.MONEY, Effect.EXTERNAL)


@dataclass(frozen=True)
class Finished:
    """A finished run: its id, how it ended and its tool calls' windows."""

    run_id: str
    status: RunStatus
    calls: list[Execution]

    @classmethod
    def of(cls, report: RunReport, submitted_at: datetime, begun_at: datetime) -> Finished:
        """From its report, when it was submitted and when it began (after a queue)."""
        return cls(report.run_id, report.status, executions(report, submitted_at, begun_at))


def rank(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (as the run report's windows)."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else 0.0


@dataclass
class ToolStaleness:
    tool: str
    irreversible: bool
    volume: int
    plan_to_use_h: tuple[float, float]  # p50, p95
    check_to_use_h: tuple[float, float]
    approval_wait_h: tuple[float, float] | None  # over the calls that waited for a card
    changes: int
    exposure_h: float
    rate_per_h: float
    rate_upper95_per_h: float | None  # with no change seen: the rule of three
    e_plan: tuple[float, float]
    e_check: tuple[float, float]
    refusals: dict[int, int]
    segments_mean_h: dict[str, float] = field(default_factory=dict)

    def json(self) -> dict[str, object]:
        return {
            "tool": self.tool, "irreversible": self.irreversible, "V": self.volume,
            "W_plan_to_use_h": {"p50": self.plan_to_use_h[0], "p95": self.plan_to_use_h[1]},
            "W_check_to_use_h": {"p50": self.check_to_use_h[0], "p95": self.check_to_use_h[1]},
            "approval_wait_h": None if self.approval_wait_h is None else {
                "p50": self.approval_wait_h[0], "p95": self.approval_wait_h[1]},
            "changes": self.changes, "exposure_h": self.exposure_h,
            "R_per_h": self.rate_per_h, "R_upper95_per_h": self.rate_upper95_per_h,
            "E_plan_to_use": {"p50": self.e_plan[0], "p95": self.e_plan[1]},
            "E_check_to_use": {"p50": self.e_check[0], "p95": self.e_check[1]},
            "409": self.refusals.get(409, 0), "412": self.refusals.get(412, 0),
            "403": self.refusals.get(403, 0),
            "segments_mean_h": self.segments_mean_h,
        }


def per_tool(runs: Iterable[Finished]) -> list[ToolStaleness]:
    by_tool: dict[str, list[Execution]] = defaultdict(list)
    for run in runs:
        for e in run.calls:
            by_tool[e.tool].append(e)
    out = [_tool(tool, calls) for tool, calls in by_tool.items()]
    return sorted(out, key=lambda t: (-t.e_plan[1], -t.volume, t.tool))


def _pair(samples: list[float]) -> tuple[float, float]:
    return rank(samples, 0.5), rank(samples, 0.95)


def _tool(tool: str, calls: list[Execution]) -> ToolStaleness:
    v = sum(c.calls for c in calls)
    plan = _pair([c.plan_to_use_h for c in calls])
    check = _pair([c.check_to_use_h for c in calls])
    waited = [c.segments["approval"] for c in calls if c.segments["approval"] > 0]
    changes = sum(c.changes for c in calls)
    # fsum: exactly rounded, so the report is the same whatever order its runs came in
    exposure = math.fsum(c.plan_to_use_h for c in calls)
    rate = changes / exposure if exposure > 0 else 0.0
    upper = 3 / exposure if changes == 0 and exposure > 0 else None
    refusals: dict[int, int] = defaultdict(int)
    for c in calls:
        for status, n in c.refusals.items():
            refusals[status] += n
    return ToolStaleness(
        tool=tool,
        irreversible=any(c.effect in IRREVERSIBLE for c in calls),
        volume=v,
        plan_to_use_h=plan,
        check_to_use_h=check,
        approval_wait_h=_pair(waited) if waited else None,
        changes=changes,
        exposure_h=exposure,
        rate_per_h=rate,
        rate_upper95_per_h=upper,
        e_plan=(plan[0] * rate * v, plan[1] * rate * v),
        e_check=(check[0] * rate * v, check[1] * rate * v),
        refusals=dict(refusals),
        segments_mean_h={s: math.fsum(c.segments[s] for c in calls) / len(calls)
                         for s in SEGMENTS},
    )


# -- how a person reads the numbers (the text and HTML reports) -------------------------------
# Under an hour watched, the rule of three's 3/H (9533 /h after 1.1 s) says how short the watch
# was, nothing about R: no bound is shown.
BOUND_FROM_H = 1.0


def bound(t: ToolStaleness) -> float | None:
    """The 95% bound on R worth showing: with no change seen in at least an hour watched."""
    if t.rate_upper95_per_h is None or t.exposure_h < BOUND_FROM_H:
        return None
    return t.rate_upper95_per_h


def no_change_words(t: ToolStaleness) -> str:
    """R when no change was seen: its bound, or why there is none."""
    b = bound(t)
    if b is not None:
        return f"0 (under {plain(b, 2)} /h at 95%, over {duration(t.exposure_h)} watched)"
    return f"0 in {duration(t.exposure_h)} watched (too short for a bound)"


def plain(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits, never in scientific notation: 0.0000034, 6.15,
    1230."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    places = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    shown = f"{round(x, places):.{places}f}"
    return shown.rstrip("0").rstrip(".") if "." in shown else shown


def duration(hours: float) -> str:
    """A window in the unit its size calls for: ``5 ms``, ``12.5 s``, ``15 min``, ``2.5 h``,
    ``3 d``."""
    s = hours * 3600
    if s == 0:
        return "0 s"
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0)):
        # a unit is used from 1 of it up (from 2 for days: 36 h reads better than 1.5 d)
        if s >= size * (2 if unit == "d" else 1):
            return f"{plain(s / size)} {unit}"
    return f"{plain(s * 1000)} ms"


def since_words(since: datetime, now: datetime) -> str:
    """The period as a person says it: ``the last 7 days``, ``the last 12 hours``."""
    s = max(0.0, (now - since).total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if s >= size and s % size < 1:
            n = round(s / size)
            return f"the last {unit}" if n == 1 else f"the last {n} {unit}s"
    return f"the last {duration(s / 3600)}"
