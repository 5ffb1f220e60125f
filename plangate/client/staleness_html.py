"""The staleness report as one HTML page with no scripts: E per tool and where each tool's
window goes, as inline SVG, and the table behind them. Windows are shown in the unit their
size calls for (``staleness.duration``), counts in plain decimals; with nothing to chart, a
sentence says why."""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

from plangate.client.staleness import (
    SEGMENTS,
    ToolStaleness,
    duration,
    no_change_words,
    plain,
    since_words,
)

COLOURS = {"planning": "#8da0cb", "queue": "#66c2a5", "approval": "#fc8d62", "run": "#a6d854",
           "check_to_use": "#e78ac3"}
ROW, LABEL, WIDTH = 26, 260, 520


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _bars(tools: list[ToolStaleness]) -> str:
    top = max(t.e_plan[1] for t in tools)
    rows = []
    for i, t in enumerate(tools):
        y = 20 + i * ROW
        p50, p95 = (LABEL + WIDTH * v / top for v in t.e_plan)
        mark = " (irreversible)" if t.irreversible else ""
        rows.append(
            f'<text x="{LABEL - 6}" y="{y + 14}" text-anchor="end">{escape(t.tool)}{mark}</text>'
            f'<rect x="{LABEL}" y="{y}" width="{p95 - LABEL:.1f}" height="18" fill="#fdae61"/>'
            f'<rect x="{LABEL}" y="{y + 5}" width="{p50 - LABEL:.1f}" height="8" fill="#d7191c"/>'
            f'<text class="e" x="{p95 + 4:.1f}" y="{y + 14}">'
            f"{plain(t.e_plan[0])} / {plain(t.e_plan[1])}</text>"
        )
    height = 40 + len(tools) * ROW
    return (f'<svg id="e-chart" role="img" aria-label="E per tool" '
            f'width="{LABEL + WIDTH + 120}" height="{height}" font-size="12">'
            f'{"".join(rows)}</svg>')


def _segments(tools: list[ToolStaleness]) -> str:
    top = max(sum(t.segments_mean_h.values()) for t in tools) or 1.0
    rows = []
    for i, t in enumerate(tools):
        y = 20 + i * ROW
        x = float(LABEL)
        rows.append(f'<text x="{LABEL - 6}" y="{y + 14}" text-anchor="end">'
                    f'{escape(t.tool)}</text>')
        for s in SEGMENTS:
            w = WIDTH * t.segments_mean_h[s] / top
            rows.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="18" '
                        f'fill="{COLOURS[s]}"><title>{s.replace("_", "-")}: '
                        f"{duration(t.segments_mean_h[s])}</title></rect>")
            x += w
        total = sum(t.segments_mean_h.values())
        rows.append(f'<text class="total" x="{x + 4:.1f}" y="{y + 14}">{duration(total)}</text>')
    legend = "".join(
        f'<rect x="{LABEL + i * 110}" y="{28 + len(tools) * ROW}" width="12" height="12" '
        f'fill="{COLOURS[s]}"/><text x="{LABEL + 16 + i * 110}" y="{38 + len(tools) * ROW}">'
        f'{s.replace("_", "-")}</text>'
        for i, s in enumerate(SEGMENTS)
    )
    height = 50 + len(tools) * ROW
    return (f'<svg id="window-chart" role="img" aria-label="where the window goes" '
            f'width="{LABEL + WIDTH + 120}" height="{height}" font-size="12">'
            f'{"".join(rows)}{legend}</svg>')


def _rate(t: ToolStaleness) -> str:
    return f"{plain(t.rate_per_h)} /h" if t.changes else no_change_words(t)


def _table(tools: list[ToolStaleness]) -> str:
    pair = "p50&nbsp;/&nbsp;p95"  # a header wraps between its words, never inside this
    head = ("tool", "V (calls)", f"W plan-to-use {pair}", f"W check-to-use {pair}",
            "approval wait p50", "R (changes)", f"E plan-to-use {pair}", "E check-to-use p95",
            "409", "412", "403")
    rows = []
    for t in tools:
        approval = duration(t.approval_wait_h[0]) if t.approval_wait_h else "-"
        cells = (
            f"{t.tool} (irreversible)" if t.irreversible else t.tool, str(t.volume),
            f"{duration(t.plan_to_use_h[0])} / {duration(t.plan_to_use_h[1])}",
            f"{duration(t.check_to_use_h[0])} / {duration(t.check_to_use_h[1])}",
            approval, f"{t.changes}: {_rate(t)}",
            f"{plain(t.e_plan[0])} / {plain(t.e_plan[1])}", plain(t.e_check[1]),
            *(str(t.refusals.get(s, 0)) for s in (409, 412, 403)),
        )
        flag = ' class="irreversible"' if t.irreversible else ""
        rows.append(f"<tr{flag}>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
    return ('<table id="tools"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head)
            + f'</tr></thead><tbody>{"".join(rows)}</tbody></table>')


def why_empty(tools: list[ToolStaleness], runs: int, period: str) -> str | None:
    """Why the E chart would be empty, in a sentence; None when it has data."""
    if runs == 0:
        return f"No finished runs in {period}: nothing to chart."
    if not tools:
        return (f"No finished runs with tool calls in {period} ({runs} finished "
                f"run{'s' if runs != 1 else ''}, none of which called a tool): nothing to chart.")
    if all(t.e_plan[1] == 0 for t in tools):
        hours = sum(t.exposure_h for t in tools)
        return (f"No change by another writer was seen under any plan in {period} "
                f"({duration(hours)} of exposure over {sum(t.volume for t in tools)} calls), "
                "so R, and with it E, is 0 for every tool: nothing to chart. The table gives "
                "each tool's 95% bound on R.")
    return None


def page(tools: list[ToolStaleness], runs: int, since: datetime,
         now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    period = since_words(since, now)
    title = f"plangate staleness: {period}"
    calls = sum(t.volume for t in tools)
    empty = why_empty(tools, runs, period)
    chart = f'<p class="empty" id="e-empty">{escape(empty)}</p>' if empty else _bars(tools)
    windows = _segments(tools) if tools else (
        '<p class="empty" id="window-empty">No tool calls: no windows to show.</p>')
    table = _table(tools) if tools else ""
    flagged = any(t.irreversible for t in tools)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1120px;color:#222}}
h1{{font-size:1.5em}}.empty{{background:#f6f6f6;padding:1em;border-radius:6px}}
table{{border-collapse:collapse;font-size:13px}}
th,td{{padding:.3em .6em;border-bottom:1px solid #ddd;text-align:right;vertical-align:top}}
td{{white-space:nowrap}}
th:first-child,td:first-child{{text-align:left}}th{{background:#f3f3f3}}
tr.irreversible td:first-child{{color:#b00;font-weight:600}}</style></head>
<body><h1>{escape(title)}</h1>
<p id="period">{runs} finished run{"s" if runs != 1 else ""} with {calls} tool
call{"s" if calls != 1 else ""}, from {_stamp(since)} to {_stamp(now)}.</p>
<h2>Expected stale executions per tool</h2>
<p>E = W &times; R &times; V: W the plan-to-use window, R the changes by other writers per
hour of exposure, V the calls; at p50 (dark) and p95 (light), ranked by E at p95.</p>
{chart}
<h2>Where the window goes</h2>
<p>Mean plan-to-use window per call, by segment: planning, queue, approval, the run's
earlier steps and waits, and check-to-use (what is left with the guard).</p>
{windows}
<h2>Table</h2>
{table or "<p>No tool calls.</p>"}
{"<p>Tools in red have an irreversible effect (money, external): the stale executions "
 "that matter.</p>" if flagged else ""}
</body></html>
"""
