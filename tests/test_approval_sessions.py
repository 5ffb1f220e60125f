"""The approval page's sessions, in headless Chromium and over plain HTTP (issue 38): login by
POST only, leading back to the page asked for (a path of the page's own only); a CSRF cookie
and token an attacker chose refused with nothing applied; a session that expires sent back to
the login form; logout ends it; an answer applied (its object in S3).

The browser test serves the page in this process (``serving``) with a clock of its own, so a
session expires when the test says, whatever the machine's load."""

from __future__ import annotations

import asyncio
import os
from urllib.parse import quote

from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from plangate.client.api import Plangate
from plangate.servers.page import PageOptions
from plangate.servers.page.server import serving
from plangate.testing import running_worker, scheduled
from tests.browser import chromium  # noqa: F401  (the fixture)
from tests.harness import approver_key
from tests.test_approval_page import (
    answer,
    csrf_of,
    put_once_approved,
    request,
    text_of,
    ui_process,
    unique,
    waiting,
)

SESSION_S = 600.0


def login_form(d: WebDriver, url: str) -> None:
    """Load ``url``: the login form shows (nothing of the page behind it)."""
    d.get(url)
    form = d.find_element(By.CSS_SELECTOR, "form[action='/login']")
    assert form.get_attribute("method") == "post"
    assert not d.find_elements(By.ID, "status") and not d.find_elements(By.ID, "summary")


def give_token(d: WebDriver, token: str, until: str) -> None:
    """Post the token through the login form; wait for the element ``until`` (by id)."""
    d.find_element(By.NAME, "token").send_keys(token)
    d.find_element(By.CSS_SELECTOR, "form[action='/login'] button").click()
    WebDriverWait(d, 30).until(lambda d: d.find_elements(By.ID, until))


def forge_csrf(d: WebDriver, url: str, forged: str) -> None:
    """What a cross-site attacker would do: a CSRF cookie and form token of their choosing."""
    d.get(url)
    d.add_cookie({"name": "plangate_csrf", "value": forged, "path": "/"})
    d.execute_script(
        "for (const i of document.querySelectorAll('input[name=csrf]')) i.value = arguments[0]",
        forged)


def log_out(d: WebDriver) -> None:
    d.find_element(By.CSS_SELECTOR, "#logout button").click()
    WebDriverWait(d, 30).until(lambda d: d.find_elements(By.NAME, "token"))


async def test_in_the_browser_login_by_post_leads_back_forged_csrf_expiry_and_logout(
    client, settings, s3, browser
):
    bucket, key = unique("sessions"), "figures.txt"
    s3.create_bucket(Bucket=bucket)
    plan = put_once_approved("publish the figures", bucket, key, "final figures")
    token = approver_key("erin").login_token()
    now = [0.0]
    options = PageOptions(session_s=SESSION_S, clock=lambda: now[0])
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        async with serving(api, [approver_key("erin")], port=0, options=options) as url:
            run_id = await api.start(plan)
            card = await waiting(api, run_id, 1)
            run_url = f"{url}run?id={quote(run_id, safe='')}"

            # -- the run's page asked for: the login form first, then (POST) that page
            await asyncio.to_thread(login_form, browser, run_url)
            await asyncio.to_thread(give_token, browser, token, "status")
            assert await asyncio.to_thread(lambda: browser.current_url) == run_url
            assert token not in await asyncio.to_thread(lambda: browser.current_url)
            assert await asyncio.to_thread(text_of, browser, "#status") == "awaiting_approval"

            # -- a CSRF cookie and token an attacker chose: refused, nothing applied
            await asyncio.to_thread(forge_csrf, browser, url, "x" * 43)
            outcome, text, _ = await asyncio.to_thread(
                answer, browser, browser.current_window_handle, card.record.digest, "approve")
            assert outcome == "refused" and "CSRF token is not this session's" in text, text
            rep = await api.report(run_id)
            assert rep.status == "awaiting_approval" and rep.approvals[0].answer is None
            assert (await scheduled(client, run_id)).get("s3.put", 0) == 0
            assert s3.list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount", 0) == 0

            # -- the page's own form: the answer applied, the object written once
            await asyncio.to_thread(browser.get, url)
            outcome, text, _ = await asyncio.to_thread(
                answer, browser, browser.current_window_handle, card.record.digest, "approve")
            assert outcome == "accepted" and f"approve of step 1 of run {run_id}" in text, text
            rep = await asyncio.wait_for(api.result(run_id), 60)
            assert rep.status == "succeeded" and rep.approvals[0].answer is not None
            assert rep.approvals[0].answer.by == "erin"
            assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"final figures"
            assert (await scheduled(client, run_id))["s3.put"] == 1

            # -- the session's time is over: back to the login form, saying why
            now[0] = SESSION_S
            await asyncio.to_thread(login_form, browser, url)
            assert "session has expired" in await asyncio.to_thread(text_of, browser, "#problem")
            assert await asyncio.to_thread(browser.get_cookie, "plangate_ui") is None
            await asyncio.to_thread(give_token, browser, token, "summary")
            assert await asyncio.to_thread(lambda: browser.current_url) == url

            # -- logout ends the session here and for anyone holding its cookie
            cookie = await asyncio.to_thread(browser.get_cookie, "plangate_ui")
            assert cookie is not None
            await asyncio.to_thread(log_out, browser)
            status, _, _ = await asyncio.to_thread(
                request, url, headers={"Cookie": f"plangate_ui={cookie['value']}"})
            assert status == 401


async def test_a_link_logs_nobody_in_and_login_leads_only_to_a_path_of_the_page(
    stack, tmp_path
):
    token = approver_key("erin").login_token()
    env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": unique("page-queue")}
    async with ui_process(env, tmp_path / "ui.log") as url:
        status, headers, body = await asyncio.to_thread(request, f"{url}?token={token}")
        assert status == 401 and not headers.get_all("Set-Cookie")
        assert 'name="token"' in body and token not in body  # not even written back

        for bad in ("//evil.example", "/\\evil.example", "http://evil.example/",
                    "https:evil.example", "evil.example"):
            status, headers, _ = await asyncio.to_thread(
                request, url + "login", "POST", {"token": token, "next": bad})
            assert status == 400 and not headers.get_all("Set-Cookie"), bad
            assert "Location" not in headers, bad

        status, headers, _ = await asyncio.to_thread(
            request, url + "login", "POST", {"token": token, "next": "/run?id=r-1"})
        assert status == 303 and headers["Location"] == "/run?id=r-1"
        session = {"Cookie": (headers.get_all("Set-Cookie") or [""])[0].split(";", 1)[0]}
        status, _, _ = await asyncio.to_thread(request, url, headers=session)
        assert status == 200

        # logout: a form without the session's token is refused and the session kept
        status, _, _ = await asyncio.to_thread(
            request, url + "logout", "POST", {"csrf": "x" * 43}, session)
        assert status == 403
        status, _, _ = await asyncio.to_thread(request, url, headers=session)
        assert status == 200
        csrf = await csrf_of(url, session)
        status, headers, _ = await asyncio.to_thread(
            request, url + "logout", "POST", {"csrf": csrf}, session)
        assert status == 303 and headers["Location"] == "/"
        assert "Max-Age=0" in (headers.get_all("Set-Cookie") or [""])[0]
        status, _, _ = await asyncio.to_thread(request, url, headers=session)
        assert status == 401
