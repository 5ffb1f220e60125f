"""The approval page (``plangate ui``) in a real headless browser: Debian's Chromium, driven by
Debian's chromedriver through Selenium. Both paths are given, so Selenium's own driver manager
never runs and nothing is downloaded (``scripts/test.sh`` installs the two packages where they
are missing). ``plangate ui`` runs as a process of its own, with a worker in this one.

What a person sees and does: the cards of open runs appear with what will happen to what, the
observed version, the digest and the time left; approving runs the step once (counted in the
Temporal history and found in S3); a stale form of an answered card and the form of an expired
card are refused on the page with the reason; a rejection needs a reason; a request without the
token, or a form without its CSRF token or from another origin, is refused. Each card links its
run (its report here, as JSON, in the Temporal Web UI); times read in the browser's own zone
(Asia/Kolkata here) to the second; Refresh brings new cards without a reload and keeps a reason
being typed; after an answer, the page says what became of the step and the run.
``PLANGATE_SCREENSHOTS=docs`` writes the pictures in docs/people.md."""

from __future__ import annotations

import asyncio
import base64
import html
import http.client
import json
import os
import re
import secrets
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from plangate.cli import main
from plangate.client.api import PendingApprovals, PendingCard, Plangate
from plangate.client.connection import connect
from plangate.plans.model import Effect
from plangate.records.approvals import ApprovalCard, ApprovalRecord
from plangate.servers.page.views import Links, card_html, cards_page, span
from plangate.testing import running_worker, scheduled
from plangate.world.settings import parse_encryption_keys
from tests.browser import chromium, in_time_zone, screenshot  # noqa: F401  (the fixture)
from tests.harness import approver_key


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def put_once_approved(goal: str, bucket: str, key: str, body: str) -> dict[str, Any]:
    """A plan of one step: ``body`` put at ``bucket``/``key`` once a person approves it."""
    return {"goal": goal, "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "approval": "required", "on_unmet": "halt",
         "args": {"bucket": bucket, "key": key, "body": body}}]}


@asynccontextmanager
async def ui_process(env: Mapping[str, str], log: Path) -> AsyncIterator[str]:
    """``plangate ui --port 0`` in a process of its own, until the block ends: its URL."""
    with log.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "plangate", "ui", "--port", "0", env=dict(env),
            stdout=asyncio.subprocess.PIPE, stderr=err,
        )
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            found = re.search(rb"serving (http://\S+/) ", line)
            assert found, (line, await asyncio.to_thread(log.read_text))
            yield found.group(1).decode()
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)


def request(url: str, method: str = "GET", form: Mapping[str, Any] | None = None,
            headers: Mapping[str, str] | None = None,
            source: str | None = None) -> tuple[int, http.client.HTTPMessage, str]:
    """One plain HTTP request (no cookies but those given, no redirects followed), from the
    address ``source`` when given."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=30,
                                      source_address=(source, 0) if source else None)
    try:
        body = urlencode(form) if form is not None else None
        sent = {"Content-Type": "application/x-www-form-urlencoded"} if form is not None else {}
        conn.request(method, u.path + (f"?{u.query}" if u.query else ""), body,
                     {**sent, **(headers or {})})
        r = conn.getresponse()
        return r.status, r.headers, r.read().decode()
    finally:
        conn.close()


async def waiting(api: Plangate, run_id: str, step: int) -> PendingCard:
    """The card of ``step`` of ``run_id`` once it is pending (10 s at most)."""
    for _ in range(100):
        for c in (await api.pending_approvals()).cards:
            if (c.run_id, c.record.step) == (run_id, step):
                return c
        await asyncio.sleep(0.1)
    raise AssertionError(f"no card of step {step} of {run_id} waits")


# -- what a person does in the browser (run in a thread: the worker shares this event loop) --
def show(d: WebDriver, url: str, tab: str | None = None) -> str:
    """Load ``url`` in ``tab``, or in a new tab: the tab."""
    if tab is None:
        d.switch_to.new_window("tab")
    else:
        d.switch_to.window(tab)
    d.get(url)
    return d.current_window_handle


def log_in(d: WebDriver, url: str, token: str) -> str:
    """Give the token to the page's login form: the tab, showing the cards."""
    d.get(url)
    d.find_element(By.NAME, "token").send_keys(token)
    d.find_element(By.CSS_SELECTOR, "form button").click()
    WebDriverWait(d, 30).until(lambda d: d.find_elements(By.ID, "summary"))
    assert d.current_url == url
    return d.current_window_handle


def text_of(d: WebDriver, css: str) -> str:
    return d.find_element(By.CSS_SELECTOR, css).text


def href_of(d: WebDriver, css: str) -> str:
    return d.find_element(By.CSS_SELECTOR, css).get_attribute("href") or ""


def card_text(d: WebDriver, digest: str) -> str:
    return d.find_element(By.CSS_SELECTOR, f'section.card[data-digest="{digest}"]').text


def answer(d: WebDriver, tab: str, digest: str, decision: str,
           reason: str = "") -> tuple[str, str, str]:
    """Press a button of the card ``digest`` in ``tab`` (as whoever the tab is logged in as):
    the outcome shown (accepted or refused), its text and the page's title."""
    d.switch_to.window(tab)
    card = d.find_element(By.CSS_SELECTOR, f'section.card[data-digest="{digest}"]')
    if reason:
        card.find_element(By.NAME, "reason").send_keys(reason)
    card.find_element(By.CSS_SELECTOR, f'button[value="{decision}"]').click()
    shown = WebDriverWait(d, 30).until(lambda d: d.find_element(By.ID, "outcome"))
    return shown.get_attribute("data-outcome") or "", shown.text, d.title


def test_the_page_refuses_to_start_without_approver_keys(monkeypatch, capsys):
    monkeypatch.delenv("PLANGATE_APPROVER_KEY", raising=False)
    assert main(["ui"]) == 2
    err = capsys.readouterr().err
    assert "plangate ui needs PLANGATE_APPROVER_KEY" in err and "\n" not in err.strip()


def test_the_page_refuses_a_temporal_ui_that_is_not_a_web_address(stack, monkeypatch, capsys):
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    assert main(["ui", "--temporal-ui", "javascript:alert(1)"]) == 2
    err = capsys.readouterr().err
    assert "the Temporal Web UI's address 'javascript:alert(1)'" in err, err
    assert "\n" not in err.strip(), err
    monkeypatch.setenv("PLANGATE_TEMPORAL_UI", "localhost:8233")  # no scheme
    assert main(["ui"]) == 2
    err = capsys.readouterr().err
    assert "'localhost:8233' (--temporal-ui, PLANGATE_TEMPORAL_UI) is not an http(s) URL" in err


def test_a_login_token_names_one_person_and_a_session_cannot_be_forged():
    from plangate.servers.page.gate import Gate
    from plangate.servers.page.sessions import Sessions

    erin, frank = approver_key("erin"), approver_key("frank")
    gate = Gate([erin, frank])
    assert gate.who(erin.login_token()) == "erin" and gate.who(frank.login_token()) == "frank"
    assert gate.who(secrets.token_urlsafe(32)) is None and gate.who("") is None
    now = [0.0]
    sessions = Sessions(ttl_s=60, clock=lambda: now[0])
    s, t = sessions.start("erin"), sessions.start("erin")
    assert sessions.find(s.id) == (s, False) and s.name == "erin"
    assert len({s.id, t.id, s.csrf, t.csrf}) == 4 and len(s.id) >= 43  # random, 256 bits
    # a session id is nothing but a key into this process's store: no other id names erin
    assert sessions.find(s.id[:-1] + ("A" if s.id[-1] != "A" else "B")) == (None, False)
    assert sessions.find(base64.urlsafe_b64encode(b"frank").decode()) == (None, False)
    assert sessions.find("") == (None, False) and sessions.find(None) == (None, False)
    assert Sessions(ttl_s=60).find(s.id) == (None, False)  # another process: logged out
    assert s.csrf_matches(s.csrf) and not s.csrf_matches(t.csrf) and not s.csrf_matches("")
    sessions.end(t.id)
    assert sessions.find(t.id) == (None, False)  # logged out
    now[0] = 59.9
    assert sessions.find(s.id) == (s, False)
    now[0] = 60.0
    assert sessions.find(s.id) == (None, True)  # expired: said once, then forgotten
    assert sessions.find(s.id) == (None, False)


def test_after_login_the_page_goes_to_a_path_of_its_own_only():
    from plangate.servers.page.csrf import local_path

    for good in ("/", "/run?id=r%201", "/run.json?id=x"):
        assert local_path(good) == good
    for bad in ("//evil.example", "///evil.example", "/\\evil.example", "\\/evil.example",
                "http://evil.example/", "https:evil.example", "evil.example", "",
                "javascript:alert(1)", "/\tx", "/\r\nSet-Cookie: a=b"):
        assert local_path(bad) is None, bad


def test_the_page_extra_and_the_session_length_are_checked(monkeypatch, capsys):
    from plangate.errors import ConfigurationError
    from plangate.servers.page import ui_options

    assert ui_options({}).session_s == 8 * 3600
    assert ui_options({"PLANGATE_UI_SESSION_S": "90"}).session_s == 90
    for bad in ("0", "-5", "soon", "nan", str(31 * 86400)):
        with pytest.raises(ConfigurationError, match="PLANGATE_UI_SESSION_S"):
            ui_options({"PLANGATE_UI_SESSION_S": bad})
    monkeypatch.setitem(sys.modules, "starlette", None)  # as if the extra were not installed
    with pytest.raises(ConfigurationError):
        ui_options({})
    assert main(["ui"]) == 2  # said before any connection is tried
    err = capsys.readouterr().err
    assert err == ("plangate: ui: the approval page's web server is not installed (starlette "
                   "is missing): pip install 'plangate[page]'\n"), err


def test_card_values_are_escaped_and_hidden_characters_shown():
    now = datetime.now(UTC)
    hostile = '"><img src=x onerror=alert(1)>'
    card = ApprovalCard(
        run_id=hostile, plan_version=1, step=3, tool="billing.issue_credit",
        effect=Effect.MONEY, args={"account_id": "acct_1\u202egnp.exe", hostile: "</code>"},
        observed={hostile: {"version": "<i>7</i>"}}, on_behalf_of="<dana>", issued_at=now,
        expires_at=now + timedelta(minutes=5, seconds=30),
    )
    record = ApprovalRecord(step=3, plan_version=1, digest=card.digest(),
                            expires_at=card.expires_at, card=card)
    page = card_html(PendingCard(run_id=hostile, goal="<script>x()</script>", record=record),
                     csrf="c" * 43, now=now)
    assert "<img" not in page and "<script" not in page and "<i>" not in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert "acct_1\\u202egnp.exe" in page and "\u202e" not in page  # shown, not obeyed
    assert "irreversible" in page and "&lt;dana&gt;" in page
    assert "5m 30s" in page and card.digest() in page
    # the run's links carry the hostile id percent-encoded, never as markup
    assert 'href="/run?id=%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E"' in page
    assert "/workflows/%22%3E%3Cimg%20src%3Dx" in page


def test_the_cards_are_shown_a_page_at_a_time_each_on_one_page():
    """250 cards: 100 a page, the soonest to expire first, each card on exactly one page; the
    count and the summary name all 250; a page past the last shows the last."""
    now = datetime.now(UTC)
    cards = []
    for i in range(250):
        card = ApprovalCard(run_id=f"run-{i:03}", plan_version=1, step=1, tool="s3.put",
                            effect=Effect.WRITE, args={"key": f"k{i}"}, issued_at=now,
                            expires_at=now + timedelta(minutes=10 + i))
        cards.append(PendingCard(run_id=card.run_id, goal=f"goal {i}", record=ApprovalRecord(
            step=1, plan_version=1, digest=card.digest(), expires_at=card.expires_at,
            card=card)))
    pending = PendingApprovals(cards=cards, runs=250, unanswered=[], truncated=False)

    def shown(page: int) -> tuple[list[str], str]:
        text = cards_page(pending, "q", "c" * 43, now, "erin", Links(), page=page)
        assert "<title>plangate: 250 approval cards</title>" in text
        assert "250 cards waiting in 250 open runs" in text
        return re.findall(r'<section class="card[^>]*data-run="(run-\d+)"', text), text

    pages = {n: shown(n) for n in (1, 2, 3)}
    runs = [r for n in (1, 2, 3) for r in pages[n][0]]
    assert [len(pages[n][0]) for n in (1, 2, 3)] == [100, 100, 50]
    assert runs == [c.run_id for c in cards]  # each once, in the list's order
    first, third = pages[1][1], pages[3][1]
    assert 'href="/?page=2">next' in first and "previous" not in first
    assert "cards 201-250 of 250" in third and 'href="/?page=2">previous' in third
    assert 'href="/?page=4"' not in third
    assert shown(9)[0] == pages[3][0]
    one = PendingApprovals(cards=cards[:3], runs=3, unanswered=[], truncated=False)
    alone = cards_page(one, "q", "c" * 43, now, "erin", Links())
    assert '<nav id="pages"></nav>' in alone and alone.count('<section class="card') == 3


def test_time_left_in_its_two_largest_units():
    assert [span(s) for s in (0, -5, 9, 70, 3600 * 5 + 61, 86400 * 2 + 3600 * 3)] == [
        "expired", "expired", "9s", "1m 10s", "5h 01m", "2d 03h"]


async def test_approving_on_the_page_runs_the_step_once_and_stale_cards_are_refused(
    client, settings, stack, s3, browser, tmp_path
):
    bucket, first, second, late = unique("ui"), unique("a") + ".txt", unique("b"), unique("c")
    s3.create_bucket(Bucket=bucket)
    publish = {"goal": "publish the <b>figures</b>", "budget": {"replans_max": 0},
               "on_behalf_of": "dana", "steps": [
                   {"n": 1, "tool": "s3.put", "approval": "required",
                    "args": {"bucket": bucket, "key": first, "body": "final figures"}},
                   {"n": 2, "tool": "s3.put", "approval": "required", "depends_on": [1],
                    "on_unmet": "halt",
                    "args": {"bucket": bucket, "key": second,
                             "body": "<script>document.title='owned'</script>\u202etxt"}}]}
    expiring = {"goal": "publish late", "budget": {"replans_max": 0}, "approval_ttl_s": 8,
                "steps": [{"n": 1, "tool": "s3.put", "approval": "required", "on_unmet": "halt",
                           "args": {"bucket": bucket, "key": late, "body": "too late"}}]}
    token = approver_key("erin").login_token()
    log = tmp_path / "ui.log"
    async with running_worker(client, settings) as h:
        env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue}
        api = Plangate(client, h.settings)
        async with ui_process(env, log) as url:
            run_a, run_b = await api.start(publish), await api.start(expiring)
            a1, b1 = await waiting(api, run_a, 1), await waiting(api, run_b, 1)

            # -- no token, no page; a form without its CSRF token or from elsewhere: refused
            status, _, body = await asyncio.to_thread(request, url)
            assert status == 401 and 'name="token"' in body and a1.record.digest not in body
            status, _, _ = await asyncio.to_thread(request, url + "?token=" + "x" * 43)
            assert status == 401
            form = {"run_id": run_a, "step": 1, "digest": a1.record.digest,
                    "decision": "approve", "as": "mallory", "csrf": "x" * 43}
            status, _, _ = await asyncio.to_thread(request, url + "answer", "POST", form)
            assert status == 401
            status, headers, _ = await asyncio.to_thread(request, url + "login", "POST",
                                                         {"token": token})
            assert status == 303 and headers["Location"] == "/"
            cookies = headers.get_all("Set-Cookie") or []
            assert cookies and all("HttpOnly" in c and "SameSite=Strict" in c for c in cookies)
            session = {"Cookie": "; ".join(c.split(";", 1)[0] for c in cookies)}
            status, _, _ = await asyncio.to_thread(request, url + "answer", "POST", form,
                                                   session)
            assert status == 403  # the CSRF token is not the session's
            # a CSRF cookie the attacker chose, equal to the form's token: refused the same
            forged = {"Cookie": session["Cookie"] + "; plangate_csrf=" + "x" * 43}
            status, _, _ = await asyncio.to_thread(request, url + "answer", "POST", form, forged)
            assert status == 403
            csrf = await csrf_of(url, session)
            status, _, _ = await asyncio.to_thread(
                request, url + "answer", "POST", {**form, "csrf": csrf},
                {**session, "Origin": "http://evil.example"},
            )
            assert status == 403  # another origin
            assert (await scheduled(client, run_a)).get("s3.put", 0) == 0

            # -- a person logs in with the token; the cards appear: what will happen to what,
            # the observed version, the digest, the time left
            tab1 = await asyncio.to_thread(log_in, browser, url, token)
            shown = await asyncio.to_thread(card_text, browser, a1.record.digest)
            assert a1.record.digest in shown and f"s3://{bucket}/{first}" in shown
            assert '"final figures"' in shown and "if_none_match" in shown  # the version
            assert f"object_version(bucket='{bucket}',key='{first}')" in shown  # observed:
            assert '{"absent": true}' in shown  # the object is absent, hence if_none_match *
            assert re.search(r"time left 23h 5\dm", shown), shown
            assert "on behalf of dana" in shown
            assert "<b>figures</b>" in await asyncio.to_thread(text_of, browser, "body")
            late_card = await asyncio.to_thread(card_text, browser, b1.record.digest)
            assert re.search(r"time left \ds", late_card), late_card
            tab2 = await asyncio.to_thread(show, browser, url)  # a second, stale copy
            tab3 = await asyncio.to_thread(show, browser, url)  # kept for the late card

            # -- approving runs the step once
            outcome, text, _ = await asyncio.to_thread(
                answer, browser, tab1, a1.record.digest, "approve")
            assert outcome == "accepted" and "approve of step 1" in text, text
            a2 = await waiting(api, run_a, 2)
            assert s3.get_object(Bucket=bucket, Key=first)["Body"].read() == b"final figures"
            assert (await scheduled(client, run_a))["s3.put"] == 1

            # -- the same card again, from the stale copy: refused by the workflow, shown
            outcome, text, title = await asyncio.to_thread(
                answer, browser, tab2, a1.record.digest, "approve")
            assert outcome == "refused" and title.startswith("plangate: Refused"), text
            assert "no longer waiting: approve" in text, text
            assert (await scheduled(client, run_a))["s3.put"] == 1

            # -- the next card: shown as text, never run as markup; a rejection needs a reason
            await asyncio.to_thread(show, browser, url, tab1)
            page = await asyncio.to_thread(text_of, browser, "body")
            assert a1.record.digest not in page and a2.record.digest in page
            shown = await asyncio.to_thread(card_text, browser, a2.record.digest)
            assert "<script>document.title='owned'</script>\\u202etxt" in shown
            assert await asyncio.to_thread(lambda: browser.title) != "owned"
            assert not await asyncio.to_thread(
                browser.find_elements, By.CSS_SELECTOR, "section.card script")
            outcome, text, _ = await asyncio.to_thread(
                answer, browser, tab1, a2.record.digest, "reject")
            assert outcome == "refused" and "a rejection needs a reason" in text, text
            await asyncio.to_thread(show, browser, url, tab1)
            outcome, text, _ = await asyncio.to_thread(
                answer, browser, tab1, a2.record.digest, "reject", "not these figures")
            assert outcome == "accepted" and "reject of step 2" in text, text
            rep_a = await api.result(run_a)

            # -- the late card, answered after it expired: refused, with the reason
            rep_b = await api.result(run_b)  # nobody answered in time: the run halted
            outcome, text, _ = await asyncio.to_thread(
                answer, browser, tab3, b1.record.digest, "approve")
            assert outcome == "refused" and "expired unanswered" in text, text

    assert rep_a.status == "halted" and rep_a.failure is not None
    assert rep_a.failure.code == "approval_rejected" and "not these figures" in rep_a.failure.detail
    assert [a.answer.by if a.answer else None for a in rep_a.approvals] == ["erin", "erin"]
    assert s3.list_objects_v2(Bucket=bucket, Prefix=second).get("KeyCount", 0) == 0
    assert rep_b.status == "halted" and rep_b.approvals[0].status == "expired"
    assert (await scheduled(client, run_b)).get("s3.put", 0) == 0
    assert s3.list_objects_v2(Bucket=bucket, Prefix=late).get("KeyCount", 0) == 0
    assert token not in await asyncio.to_thread(log.read_text)  # the log redacts the token


async def csrf_of(url: str, session: Mapping[str, str]) -> str:
    """The CSRF token of the session's forms, as its cards page carries it."""
    status, _, page = await asyncio.to_thread(request, url, headers=session)
    assert status == 200, status
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, page
    return found.group(1)


async def logged_in(url: str, token: str) -> tuple[dict[str, str], str]:
    """Log in with the token (POST): the session's Cookie header and its CSRF token."""
    status, headers, _ = await asyncio.to_thread(request, url + "login", "POST",
                                                 {"token": token})
    assert status == 303, status
    jar = "; ".join(c.split(";", 1)[0] for c in headers.get_all("Set-Cookie") or [])
    assert jar.startswith("plangate_ui="), jar
    session = {"Cookie": jar}
    return session, await csrf_of(url, session)


async def test_the_page_answers_only_runs_of_its_own_task_queue(client, settings, stack, s3,
                                                                tmp_path):
    bucket = unique("queues")
    s3.create_bucket(Bucket=bucket)

    def plan(key: str) -> dict[str, Any]:
        return put_once_approved(f"publish {key}", bucket, key, key)

    token = approver_key("erin").login_token()
    async with running_worker(client, settings) as a, running_worker(client, settings) as b:
        env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": a.settings.temporal.task_queue}
        api_a, api_b = Plangate(client, a.settings), Plangate(client, b.settings)
        async with ui_process(env, tmp_path / "ui.log") as url:
            run_a, run_b = await api_a.start(plan("a.txt")), await api_b.start(plan("b.txt"))
            card_a, card_b = await waiting(api_a, run_a, 1), await waiting(api_b, run_b, 1)
            session, csrf = await logged_in(url, token)
            status, _, page = await asyncio.to_thread(request, url, headers=session)
            assert status == 200 and card_a.record.digest in page
            assert run_b not in page and card_b.record.digest not in page
            # a page of cards past the last shows the last; one that is no page is refused
            status, _, page = await asyncio.to_thread(request, f"{url}?page=7", headers=session)
            assert status == 200 and card_a.record.digest in page
            for bad in ("0", "-1", "two", "1.5", "9" * 7):
                status, _, page = await asyncio.to_thread(
                    request, f"{url}?page={quote(bad)}", headers=session)
                assert status == 400 and "?page=N" in page and card_a.record.digest not in page
            # nor is queue B's run's report shown here, readable or as JSON
            for route in ("run", "run.json"):
                status, _, page = await asyncio.to_thread(
                    request, f"{url}{route}?id={quote(run_b)}", headers=session)
                assert status == 404 and "publish b.txt" not in page, page

            # a form for queue B's card, as an attacker would write it: refused, not applied
            form = {"run_id": run_b, "step": 1, "digest": card_b.record.digest,
                    "decision": "approve", "as": "mallory", "csrf": csrf}
            status, _, page = await asyncio.to_thread(request, url + "answer", "POST", form,
                                                      session)
            assert status == 404, page
            assert (f"no run {run_b} waits on task queue {a.settings.temporal.task_queue}" in
                    html.unescape(page)), page
            rep_b = await api_b.report(run_b)
            assert rep_b.status == "awaiting_approval" and rep_b.approvals[0].answer is None
            assert (await scheduled(client, run_b)).get("s3.put", 0) == 0

            # its own card: applied, and shown as applied
            # the form claims another name: the answer is the session's person's, signed
            form = {**form, "run_id": run_a, "digest": card_a.record.digest, "as": "mallory"}
            status, _, page = await asyncio.to_thread(request, url + "answer", "POST", form,
                                                      session)
            assert status == 200 and 'data-outcome="accepted"' in page, page
            assert "approve of step 1 of run " + run_a in html.unescape(page), page
            rep_a = await api_a.result(run_a)
        await api_b.cancel(run_b, reason="test over")
    assert rep_a.status == "succeeded" and rep_a.approvals[0].answer is not None
    assert rep_a.approvals[0].answer.by == "erin"
    assert s3.get_object(Bucket=bucket, Key="a.txt")["Body"].read() == b"a.txt"
    assert s3.list_objects_v2(Bucket=bucket, Prefix="b.txt").get("KeyCount", 0) == 0


async def test_a_card_the_page_cannot_read_is_never_signed(settings, stack, s3, tmp_path):
    """Keys mid-rotation: the worker encrypts with a new key the page does not hold yet. The
    page cannot read the card the answer would sign (it showed a 500 before, and once signed
    the answer): it refuses, naming why, with nothing signed or sent; the run still waits."""
    old, new = (base64.b64encode(os.urandom(32)).decode() for _ in range(2))
    keys = parse_encryption_keys(f"k2:{new},k1:{old}")
    rotated = replace(settings, encryption=replace(settings.encryption, keys=keys))
    bucket, key = unique("rotated"), "approved.txt"
    s3.create_bucket(Bucket=bucket)
    plan = put_once_approved("publish once approved", bucket, key, "approved")
    token = approver_key("erin").login_token()
    async with running_worker(await connect(rotated), rotated) as h:
        api = Plangate(h.client, h.settings)
        env = {**os.environ, **stack.env(),
               "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue,
               "PLANGATE_ENCRYPTION_KEYS": f"k1:{old}"}
        async with ui_process(env, tmp_path / "ui.log") as url:
            run_id = await api.start(plan)
            card = await waiting(api, run_id, 1)
            session, csrf = await logged_in(url, token)
            form = {"run_id": run_id, "step": 1, "digest": card.record.digest,
                    "decision": "approve", "as": "erin", "csrf": csrf}
            status, _, page = await asyncio.to_thread(request, url + "answer", "POST", form,
                                                      session)
            rep = await api.report(run_id)
            await api.cancel(run_id, reason="test over")
    assert status == 409 and 'data-outcome="accepted"' not in page, page
    assert f"the report of run '{run_id}' cannot be read here (" in html.unescape(page), page
    assert "so its card cannot be shown; nothing signed" in html.unescape(page), page
    assert rep.status == "awaiting_approval" and rep.approvals[0].answer is None
    assert rep.approvals[0].approvals == []
    assert s3.list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount", 0) == 0


def raw_request(url: str, line: str) -> bytes:
    """Send ``line`` as the request line, as it is: the first line of the answer (the body's,
    when the server answers as to HTTP/0.9)."""
    u = urlsplit(url)
    with socket.create_connection((u.hostname or "", u.port or 80), timeout=30) as conn:
        conn.sendall(line.encode() + b"\r\n\r\n")
        return conn.makefile("rb").readline()


async def test_the_log_never_holds_the_token_in_any_form(client, settings, stack, tmp_path):
    token = approver_key("erin").login_token()
    quoted = "".join(f"%{b:02X}" for b in token.encode())
    forms = {  # each way a URL can carry it: the status each gets (a URL logs nobody in)
        f"/?token={token}": 401, f"/?%74oken={token}": 401, f"/?token={quoted}": 401,
        f"/?tok%65n={quoted.lower()}&x=1": 401, f"/?x=1&token={token}": 401,
        f"/?TOKEN={token}": 401, f"/?{token}": 401, f"/?t=1;token={token}": 401,
        f"/{token}": 404, f"/login?token={token}": 404, f"/%2F?{quote(token)}": 404,
    }
    log = tmp_path / "ui.log"
    async with running_worker(client, settings) as h:
        env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue}
        async with ui_process(env, log) as url:
            base = url.rstrip("/")
            for path, want in forms.items():
                status, _, _ = await asyncio.to_thread(request, base + path)
                assert status == want, (path, status)
            status, _, _ = await asyncio.to_thread(request, url + "login", "POST",
                                                   {"token": token, "next": f"/?token={token}"})
            assert status == 303  # the way in: a form's body, never written
            # request lines the server cannot parse: a parser's error may quote them
            for line in (f"GET /?token={token} HTTP/1.1 extra", f"{token} / HTTP/1.1",
                         f"GET /?token={token} HTTP/7", f"GET /{quoted}"):
                assert await asyncio.to_thread(raw_request, url, line)  # answered (an error)
    text = await asyncio.to_thread(log.read_text)
    for shown in (token, quoted, quoted.lower(), quote(token), token[:16], token[-16:]):
        assert shown not in text, shown
    lines = text.splitlines()
    assert sum("GET /?<query> HTTP/1.1 401" in line for line in lines) == 8, text
    assert sum("GET <other path>" in line and line.endswith(" 404") for line in lines) == 2, text
    assert sum(line.endswith("GET /login?<query> HTTP/1.1 404") for line in lines) == 1, text
    assert sum(line.endswith("POST /login HTTP/1.1 303") for line in lines) == 1, text
    assert sum(line.endswith("Invalid HTTP request received.") for line in lines) == 4, text


async def test_wrong_tokens_are_throttled_per_address(client, settings, stack, tmp_path):
    token = approver_key("erin").login_token()

    async def log_in(given: str, source: str | None = None) -> tuple[int, str | None]:
        status, headers, _ = await asyncio.to_thread(request, url + "login", "POST",
                                                     {"token": given}, None, source)
        return status, headers.get("Retry-After")

    async with running_worker(client, settings) as h:
        env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue}
        async with ui_process(env, tmp_path / "ui.log") as url:
            for _ in range(5):  # the first few wrong tokens only fail
                assert await log_in(secrets.token_urlsafe(32)) == (401, None)
            # then this address waits: the right token too is refused unheard
            assert await log_in(token) == (429, "1")
            assert await log_in(token, source="127.0.0.2") == (303, None)  # another address
            await asyncio.sleep(1.2)
            assert (await log_in(token))[0] == 303  # once the wait is over, it is heard
            for _ in range(5):  # the right token cleared the count: it starts over
                assert (await log_in("wrong-" + token))[0] == 401
            assert (await log_in(token))[0] == 429
            await asyncio.sleep(1.2)
            assert (await log_in("wrong-" + token))[0] == 401  # heard, and wrong again
            assert await log_in(token) == (429, "2")  # the wait has doubled
            status, headers, _ = await asyncio.to_thread(request, url + "?token=" + token)
            assert status == 401 and not headers.get_all("Set-Cookie")  # a link logs nobody in


def test_the_temporal_ui_link_is_built_and_checked():
    from plangate.servers.page import temporal_ui_arg
    from plangate.servers.page.views import Links

    assert Links().temporal("r 1/x") == "http://localhost:8233/namespaces/default/workflows/r%201%2Fx"
    assert Links(temporal_ui_arg("https://temporal.example/ui/"), "prod").temporal("r") == (
        "https://temporal.example/ui/namespaces/prod/workflows/r")
    for bad in ("javascript:alert(1)", "localhost:8233", "http://x/?a=1", ""):
        with pytest.raises(ValueError):
            temporal_ui_arg(bad)


# -- the reader's own time zone: far from UTC, with a half-hour offset ------------------------
LOCAL_ZONE, LOCAL_OFFSET = "Asia/Kolkata", timedelta(hours=5, minutes=30)
LOCAL_TIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} GMT\+5:30$")


def times_shown(d: WebDriver, within: str = "body") -> list[tuple[str, str]]:
    """Each <time> on the page: its text and its title."""
    return [(t.text, t.get_attribute("title") or "")
            for t in d.find_elements(By.CSS_SELECTOR, f"{within} time")]


def assert_local(shown: list[tuple[str, str]]) -> None:
    """Each time reads as the instant its title gives (ISO, UTC), in the reader's zone, to the
    second."""
    assert shown
    for text, title in shown:
        assert LOCAL_TIME.match(text), (text, title)
        at = datetime.fromisoformat(title)
        assert at.utcoffset() == timedelta(0) and at.microsecond == 0, title
        assert text == (at + LOCAL_OFFSET).strftime("%Y-%m-%d %H:%M:%S") + " GMT+5:30"


def card_links(d: WebDriver, digest: str) -> dict[str, str]:
    card = d.find_element(By.CSS_SELECTOR, f'section.card[data-digest="{digest}"]')
    return {a.get_attribute("class") or "": a.get_attribute("href") or ""
            for a in card.find_elements(By.CSS_SELECTOR, "p.links a")}


def type_reason(d: WebDriver, digest: str, text: str) -> None:
    box = d.find_element(By.CSS_SELECTOR, f'section.card[data-digest="{digest}"] [name=reason]')
    box.clear()
    if text:
        box.send_keys(text)


def reason_of(d: WebDriver, digest: str) -> str:
    return d.find_element(
        By.CSS_SELECTOR, f'section.card[data-digest="{digest}"] [name=reason]'
    ).get_attribute("value") or ""


def refresh_until(d: WebDriver, digest: str) -> None:
    """Press Refresh until the card ``digest`` is on the page."""
    def shown(d: WebDriver) -> bool:
        if d.find_elements(By.CSS_SELECTOR, f'section.card[data-digest="{digest}"]'):
            return True
        d.find_element(By.ID, "refresh").click()
        return False
    WebDriverWait(d, 30, poll_frequency=0.5).until(shown)


def follow(d: WebDriver, css: str) -> None:
    """Click the link ``css`` and wait for the page it leads to."""
    link = d.find_element(By.CSS_SELECTOR, css)
    href = link.get_attribute("href")
    link.click()
    WebDriverWait(d, 30).until(lambda d: d.current_url == href)


def table_rows(d: WebDriver, table: str) -> list[str]:
    return [r.text for r in d.find_elements(By.CSS_SELECTOR, f"table#{table} tbody tr")]


async def test_a_card_links_its_run_the_page_refreshes_in_place_and_says_what_came_next(
    client, settings, stack, s3, browser, tmp_path
):
    bucket = unique("next")
    s3.create_bucket(Bucket=bucket)
    publish = {"goal": "publish the quarterly figures", "budget": {"replans_max": 0},
               "on_behalf_of": "dana", "steps": [
                   {"n": 1, "tool": "s3.put", "approval": "required",
                    "args": {"bucket": bucket, "key": "figures.txt", "body": "final figures"}},
                   {"n": 2, "tool": "s3.put", "approval": "required", "depends_on": [1],
                    "on_unmet": "halt",
                    "args": {"bucket": bucket, "key": "summary.txt", "body": "summary"}}]}
    later = {"goal": "publish the summary later", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "approval": "required", "on_unmet": "halt",
         "args": {"bucket": bucket, "key": "later.txt", "body": "later"}}]}
    ui = "http://temporal-ui.example:8080"
    token = approver_key("erin").login_token()
    async with running_worker(client, settings) as h:
        env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue,
               "PLANGATE_TEMPORAL_UI": ui + "/"}
        api, ns = Plangate(client, h.settings), h.settings.temporal.namespace
        async with ui_process(env, tmp_path / "ui.log") as url:
            run_a = await api.start(publish)
            a1 = await waiting(api, run_a, 1)
            await asyncio.to_thread(in_time_zone, browser, LOCAL_ZONE)
            tab = await asyncio.to_thread(log_in, browser, url, token)

            # -- each card links its run: its report here, as JSON, and in the Temporal Web UI
            links = await asyncio.to_thread(card_links, browser, a1.record.digest)
            assert links == {"run": f"{url}run?id={quote(run_a, safe='')}",
                             "json": f"{url}run.json?id={quote(run_a, safe='')}",
                             "temporal": f"{ui}/namespaces/{ns}/workflows/{run_a}"}, links

            # -- times in the reader's zone, to the second; the ISO value in the title
            shown = await asyncio.to_thread(times_shown, browser)
            assert_local(shown)
            issued = a1.record.card.issued_at.astimezone(UTC).replace(microsecond=0)
            assert issued.isoformat() in [title for _, title in shown]
            assert "." not in " ".join(text for text, _ in shown)  # no fractions of a second

            # -- Refresh brings a new card in place: no reload, the half-typed reason kept
            await asyncio.to_thread(type_reason, browser, a1.record.digest, "half a reas")
            await asyncio.to_thread(browser.execute_script, "window.notReloaded = true")
            run_b = await api.start(later)
            b1 = await waiting(api, run_b, 1)
            await asyncio.to_thread(refresh_until, browser, b1.record.digest)
            assert await asyncio.to_thread(browser.execute_script, "return window.notReloaded")
            assert await asyncio.to_thread(reason_of, browser, a1.record.digest) == "half a reas"
            assert_local(await asyncio.to_thread(times_shown, browser))  # the new card's too
            await asyncio.to_thread(type_reason, browser, a1.record.digest, "")

            # -- approved: the page says what the step did next
            outcome, text, _ = await asyncio.to_thread(
                answer, browser, tab, a1.record.digest, "approve")
            assert outcome == "accepted" and "approve of step 1" in text, text
            said = await asyncio.to_thread(text_of, browser, "#next")
            assert re.search(r"Then: step 1 \(s3\.put\) is DONE; the run is "
                             r"(running|awaiting_approval)$", said), said
            assert_local(await asyncio.to_thread(times_shown, browser, "#next"))
            a2 = await waiting(api, run_a, 2)

            # -- and the cards page lists the answers given here with what became of them
            await asyncio.to_thread(show, browser, url, tab)
            answered = await asyncio.to_thread(text_of, browser, "#answered")
            assert f"approve of step 1 of run {run_a} by erin at " in answered, answered
            assert "step 1 (s3.put) is DONE; the run is awaiting_approval" in answered, answered
            assert_local(await asyncio.to_thread(times_shown, browser, "#answered"))
            await asyncio.to_thread(screenshot, browser, "approval-page.png")

            # -- rejected: the run's state first
            outcome, text, _ = await asyncio.to_thread(
                answer, browser, tab, a2.record.digest, "reject", "not these figures")
            assert outcome == "accepted" and "reject of step 2" in text, text
            said = await asyncio.to_thread(text_of, browser, "#next")
            assert re.search(r"Then: the run is halted \(approval_rejected: .*not these figures"
                             r".*\); step 2 \(s3\.put\) is HALTED", said), said

            # -- the run's report, readable: its state, steps, failure and approvals
            await asyncio.to_thread(follow, browser, "#next + p.links a.run")
            assert await asyncio.to_thread(text_of, browser, "#status") == "halted"
            steps = await asyncio.to_thread(table_rows, browser, "steps")
            assert [r.split()[:5] for r in steps] == [
                ["1", "1", "s3.put", "write", "DONE"], ["2", "1", "s3.put", "write", "HALTED"]]
            cards = await asyncio.to_thread(table_rows, browser, "approvals")
            assert re.match(r"1 1 s3\.put approved .* approve by erin at .*GMT\+5:30$", cards[0],
                            re.S), cards
            assert re.match(r"2 1 s3\.put rejected .* reject by erin at .*: not these figures$",
                            cards[1], re.S), cards
            assert "approval_rejected" in await asyncio.to_thread(text_of, browser, "#failure")
            assert_local(await asyncio.to_thread(times_shown, browser))
            temporal = await asyncio.to_thread(href_of, browser, "p.links a.temporal")
            assert temporal == f"{ui}/namespaces/{ns}/workflows/{run_a}"
            await asyncio.to_thread(screenshot, browser, "approval-run.png")

            # -- and as JSON, for the session only
            session, _ = await logged_in(url, token)
            status, headers, body = await asyncio.to_thread(
                request, f"{url}run.json?id={quote(run_a)}", headers=session)
            assert status == 200 and headers["Content-Type"].startswith("application/json")
            report = json.loads(body)
            assert report["run_id"] == run_a and report["status"] == "halted"
            status, _, _ = await asyncio.to_thread(request, f"{url}run?id={quote(run_a)}")
            assert status == 401  # no session, no report
        await api.cancel(run_b, reason="test over")


def test_the_page_extra_and_its_files_ship_with_the_package():
    """A non-editable install carries the templates and static files (package-data), and the
    ``page`` extra names what the page imports."""
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())
    page = {re.split(r"[<>=\[ ]", r, maxsplit=1)[0].lower()
            for r in project["project"]["optional-dependencies"]["page"]}
    assert page == {"starlette", "uvicorn", "jinja2"}
    patterns = project["tool"]["setuptools"]["package-data"]["plangate.servers.page"]
    folder = root / "plangate" / "servers" / "page"
    files = [p.relative_to(folder).as_posix() for p in folder.glob("*/*")
             if p.parent.name in ("templates", "static")]
    assert len(files) >= 9, files
    for f in files:
        assert any(fnmatch.fnmatch(f, pat) for pat in patterns), f
