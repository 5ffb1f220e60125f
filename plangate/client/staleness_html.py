"""The staleness report as one HTML page with no scripts: E per tool and where each tool's
window goes, as inline SVG, and the table behind them."""

from __future__ import annotations

from datetime import datetime
from html import escape

from plangate.client.staleness import SEGMENTS, ToolStaleness

COLOURS = {"planning": "#8da0cb", "queue": "#66c2a5", "approval": "#fc8d62", "run": "#a6d854",
           "check_to_use": "#e78ac3"}
ROW, LABEL, WIDTH = 26, 260, 520


def _bars(tools: list[ToolStaleness]) -> str:
    top = max((t.e_plan[1] for t in tools), default=0.0) or 1.0
    rows = []
    for i, t in enumerate(tools):
        y = 20 + i * ROW
        p50, p95 = (LABEL + WIDTH * v / top for v in t.e_plan)
        mark = " (irreversible)" if t.irreversible else ""
        rows.append(
            f'<text x="{LABEL - 6}" y="{y + 14}" text-anchor="end">{escape(t.tool)}{mark}</text>'
            f'<rect x="{LABEL}" y="{y}" width="{p95 - LABEL:.1f}" height="18" fill="#fdae61"/>'
            f'<rect x="{LABEL}" y="{y + 5}" width="{p50 - LABEL:.1f}" height="8" fill="#d7191c"/>'
            f'<text x="{p95 + 4:.1f}" y="{y + 14}">{t.e_plan[0]:.3g} / {t.e_plan[1]:.3g}</text>'
        )
    height = 40 + len(tools) * ROW
    return (f'<svg role="img" aria-label="E per tool" width="{LABEL + WIDTH + 120}" '
            f'height="{height}" font-size="12">{"".join(rows)}</svg>')


def _segments(tools: list[ToolStaleness]) -> str:
    top = max((sum(t.segments_mean_h.values()) for t in tools), default=0.0) or 1.0
    rows = []
    for i, t in enumerate(tools):
        y = 20 + i * ROW
        x = float(LABEL)
        rows.append(f'<text x="{LABEL - 6}" y="{y + 14}" text-anchor="end">'
                    f'{escape(t.tool)}</text>')
        for s in SEGMENTS:
            w = WIDTH * t.segments_mean_h[s] / top
            rows.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="18" '
                        f'fill="{COLOURS[s]}"><title>{s}: {t.segments_mean_h[s]:.4g} h'
                        f'</title></rect>')
            x += w
        total = sum(t.segments_mean_h.values())
        rows.append(f'<text x="{x + 4:.1f}" y="{y + 14}">{total:.3g} h</text>')
    legend = "".join(
        f'<rect x="{LABEL + i * 110}" y="{28 + len(tools) * ROW}" width="12" height="12" '
        f'fill="{COLOURS[s]}"/><text x="{LABEL + 16 + i * 110}" y="{38 + len(tools) * ROW}">'
        f'{s.replace("_", "-")}</text>'
        for i, s in enumerate(SEGMENTS)
    )
    height = 50 + len(tools) * ROW
    return (f'<svg role="img" aria-label="where the window goes" width="{LABEL + WIDTH + 120}" '
            f'height="{height}" font-size="12">{"".join(rows)}{legend}</svg>')


def page(tools: list[ToolStaleness], table: list[str], runs: int, since: datetime) -> str:
    title = f"plangate staleness since {since.isoformat(timespec='seconds')}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1120px}}
h1{{font-size:1.5em}}pre{{font-size:12px;background:#f6f6f6;padding:1em;overflow-x:auto}}</style></head>
<body><h1>{escape(title)}</h1>
<p>{runs} finished runs. Expected stale executions per tool, E = W &times; R &times; V
(W the plan-to-use window in hours, R changes by other writers per hour, V calls), at p50
(dark) and p95 (light), ranked by E at p95.</p>
{_bars(tools)}
<h2>Where the window goes</h2>
<p>Mean plan-to-use window per call, by segment: planning, queue, approval, the run's
earlier steps and waits, and check-to-use (what is left with the guard).</p>
{_segments(tools)}
<h2>Table</h2>
<pre>{escape(chr(10).join(table))}</pre>
</body></html>
"""
