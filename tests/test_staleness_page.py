"""The staleness report as a person reads it: windows in the unit their size calls for, counts
in plain decimals (never scientific notation), the table as a table, and a chart with data or
a sentence saying why there is none; the HTML page read in a real browser (``tests/browser.py``)
over real runs through ``plangate report --html``."""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

from plangate.cli import main
from plangate.client import reporting
from plangate.client.api import Plangate
from plangate.client.staleness import duration, per_tool, plain
from plangate.testing import running_worker
from tests.browser import chromium, screenshot  # noqa: F401  (the fixture)
from tests.test_staleness import T0, approve_after_a_move, publish, report_json, seeded

H = timedelta(hours=1)
SCIENTIFIC = re.compile(r"\d[eE][-+]?\d")


def test_windows_and_counts_in_human_units():
    assert [duration(h) for h in (0, 0.005 / 3600, 12.34 / 3600, 0.25, 2.5, 36, 72)] == [
        "0 s", "5 ms", "12.3 s", "15 min", "2.5 h", "36 h", "3 d"]
    assert [plain(x) for x in (0, 3.4e-6, 0.25 * 2 / 3.25 * 4, 6.15)] == [
        "0", "0.0000034", "0.615", "6.15"]
    lines = reporting.text(per_tool(seeded()), 6, T0)
    update = next(line for line in lines if "customer.update" in line)
    # W plan 15 min / 2.5 h, check 5 ms / 5 ms; E unguarded 0.615 / 6.15, guarded 0.0000034
    assert "15 min / 2.5 h" in update and "5 ms / 5 ms" in update, update
    assert "0.615 / 6.15" in update and "0.0000034" in update, update
    assert not any(SCIENTIFIC.search(line) for line in lines), lines
    assert reporting.text([], 0, T0)[-1] == (
        "no finished runs with tool calls since 2026-11-02 18:00:00 UTC: nothing to report")


def test_an_empty_chart_says_why():
    from plangate.client.staleness_html import page, why_empty

    since, now = T0, T0 + 7 * 24 * H
    assert why_empty([], 0, "the last 7 days") == (
        "No finished runs in the last 7 days: nothing to chart.")
    assert why_empty([], 2, "the last 7 days") == (
        "No finished runs with tool calls in the last 7 days (2 finished runs, none of which "
        "called a tool): nothing to chart.")
    assert why_empty(per_tool(seeded()), 6, "the last 7 days") is None  # changes were seen
    html = page([], 2, since, now)
    assert "<pre>" not in html and "0 / 0" not in html
    assert "No finished runs with tool calls in the last 7 days" in html


def test_a_bound_on_r_only_over_an_hour_watched():
    from plangate.client.staleness import no_change_words

    quiet = per_tool(seeded())
    credit = next(t for t in quiet if t.changes == 0)  # 16 h watched, nothing moved
    assert no_change_words(credit) == "0 (under 0.19 /h at 95%, over 16 h watched)"
    brief = replace(credit, exposure_h=1.1 / 3600, rate_upper95_per_h=3 / (1.1 / 3600))
    assert no_change_words(brief) == "0 in 1.1 s watched (too short for a bound)"
    [row] = [line for line in reporting.text([brief], 1, T0) if brief.tool in line]
    assert "<" not in row, row  # the text report's column: 0, no bound
    [row] = [line for line in reporting.text([credit], 1, T0) if credit.tool in line]
    assert "<0.19" in row, row


def read_page(d: WebDriver, path: Path) -> dict[str, Any]:
    """What the page shows: its title, the no-data sentences, the chart's labels, the table."""
    d.get(path.as_uri())
    return {
        "title": d.find_element(By.TAG_NAME, "h1").text,
        "body": d.find_element(By.TAG_NAME, "body").text,
        "empty": [p.text for p in d.find_elements(By.CSS_SELECTOR, "p.empty")],
        "e": [t.text for t in d.find_elements(By.CSS_SELECTOR, "#e-chart text.e")],
        "totals": [t.text for t in d.find_elements(By.CSS_SELECTOR, "#window-chart text.total")],
        "head": [c.text for c in d.find_elements(By.CSS_SELECTOR, "table#tools thead th")],
        "rows": [[c.text for c in r.find_elements(By.TAG_NAME, "td")]
                 for r in d.find_elements(By.CSS_SELECTOR, "table#tools tbody tr")],
        "pre": d.find_elements(By.TAG_NAME, "pre"),
        # the lines each table cell takes as drawn: a value and its unit never wrap apart
        "wrapped": d.execute_script(
            "return [...document.querySelectorAll('table#tools td')].filter(c => {"
            " const r = document.createRange(); r.selectNodeContents(c);"
            " return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1"
            "}).map(c => c.textContent)"),
        "pairs": d.execute_script(  # "p50 / p95" in a header: on one line
            "return [...document.querySelectorAll('table#tools th')].filter(c => {"
            " const t = c.firstChild, i = t.data.indexOf('p50'); if (i < 0) return false;"
            " const r = document.createRange(); r.setStart(t, i); r.setEnd(t, t.data.length);"
            " return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1"
            "}).map(c => c.textContent)"),
    }


async def html_report(path: Path, since: str, runs: int, env: dict[str, str], monkeypatch: Any,
                      capsys: Any) -> None:
    """``plangate report --html`` once visibility lists ``runs`` finished runs."""
    await report_json(env, runs, monkeypatch, capsys)
    code = await asyncio.to_thread(main, ["report", "--since", since, "--html", str(path)])
    assert code == 0
    capsys.readouterr()


async def test_the_html_report_charts_real_runs_or_says_why_not(
    client, settings, stack, s3, browser, monkeypatch, capsys, tmp_path
):
    bucket = f"stale-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="figures.txt", Body=b"v1")
    page = tmp_path / "staleness.html"
    async with running_worker(client, settings) as h:
        env = {**stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue}
        api = Plangate(client, h.settings)

        # -- nothing finished yet: no chart, a sentence saying why
        await html_report(page, "7d", 0, env, monkeypatch, capsys)
        shown = await asyncio.to_thread(read_page, browser, page)
        assert shown["title"] == "plangate staleness: the last 7 days"
        assert shown["empty"][0] == "No finished runs in the last 7 days: nothing to chart."
        assert shown["e"] == [] and shown["rows"] == []

        # -- a run where nothing moved (a dev stack's first run): E is 0, and the page says so
        # rather than charting 0 / 0
        just = await api.start(publish(bucket, "quiet.txt", datetime.now(UTC), approval=False))
        assert (await api.result(just)).status == "succeeded"
        await html_report(page, "1h", 1, env, monkeypatch, capsys)
        shown = await asyncio.to_thread(read_page, browser, page)
        assert shown["title"] == "plangate staleness: the last hour"
        assert shown["empty"][0].startswith(
            "No change by another writer was seen under any plan in the last hour ("), shown
        assert "so R, and with it E, is 0 for every tool: nothing to chart" in shown["empty"][0]
        assert shown["e"] == [] and not shown["pre"]
        [total] = shown["totals"]
        assert re.fullmatch(r"\d+(\.\d+)? (ms|s)", total), total  # a run of moments
        [row] = shown["rows"]
        # moments watched: no 95% bound on R (3/H of a second is thousands an hour), said so
        assert row[:2] == ["s3.put", "1"], row
        assert re.fullmatch(r"0: 0 in \d+(\.\d+)? (ms|s) watched \(too short for a bound\)",
                            row[5]), row
        assert shown["wrapped"] == [] and shown["pairs"] == [], shown

        # -- plans written 8 h ago; one waited for a card while another writer moved the object
        written = datetime.now(UTC) - 8 * H
        night = await api.submit(publish(bucket, "night.txt", written, approval=False))
        handle = await api.submit(publish(bucket, "figures.txt", written, approval=True))
        await approve_after_a_move(api, s3, bucket, handle.id)
        assert [(await night.result()).status, (await handle.result()).status] == [
            "succeeded", "succeeded"]
        await html_report(page, "1h", 3, env, monkeypatch, capsys)
        shown = await asyncio.to_thread(read_page, browser, page)
        await asyncio.to_thread(screenshot, browser, "staleness.png")

    assert shown["empty"] == [] and not shown["pre"]
    assert shown["wrapped"] == [] and shown["pairs"] == [], shown
    assert shown["head"][:3] == ["tool", "V (calls)", "W plan-to-use p50 / p95"], shown["head"]
    [row] = shown["rows"]
    # by hand: 3 calls, used moments, 8 h and 8 h after planning; 1 change in ~16 h of exposure:
    # R ~ 0.0625 /h, E(p50) = 8 h x R x 3 ~ 1.5, E(p95) the same
    assert row[:2] == ["s3.put", "3"], row
    assert re.fullmatch(r"8 h / 8 h", row[2]), row
    assert re.fullmatch(r"\d+(\.\d+)? ms / \d+(\.\d+)? ms", row[3]), row  # the guard: ms
    assert re.fullmatch(r"1: 0\.06\d* /h", row[5]), row
    [e] = shown["e"]
    p50, p95 = (float(x) for x in e.split(" / "))
    assert 1.4 < p50 <= p95 < 1.6, e
    assert all(re.fullmatch(r"\d+(\.\d+)? (ms|s|min|h|d)", t) for t in shown["totals"])
    assert not SCIENTIFIC.search(shown["body"]), shown["body"]
