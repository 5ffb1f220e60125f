"""Approvals delivered (issue 51): the approval page sends each card to an SMTP server (aiosmtpd)
and a webhook receiver written here, once per channel, with the call in words and a link that
shows the card; a chat's click comes back signed to ``/chat/actions``: a wrong signature, a
stale one or an unlisted user is refused with nothing applied, a right one approves (the object
written once), and a world moved before the click gives a new card (delivered too, its webhook
after a 500: retried, both attempts recorded) and no effect."""

from __future__ import annotations

import asyncio
import email
import hashlib
import hmac
import http.client
import json
import os
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from aiosmtpd.controller import Controller

from plangate.cli import main
from plangate.client.api import Plangate
from plangate.errors import ConfigurationError
from plangate.servers.notify.loop import Deliveries
from plangate.servers.notify.settings import (
    Chat,
    Email,
    Notify,
    chat_approvers_held,
    chat_settings,
    notify_settings,
)
from plangate.servers.page import PageOptions
from plangate.servers.page.chat import signature
from plangate.servers.page.server import serving
from plangate.testing import running_worker, scheduled
from plangate.world import deliveries
from plangate.world.clients import World
from tests.harness import approver_key
from tests.test_approval_page import put_once_approved, request, ui_process, unique, waiting
from tests.test_approvals import events, sent

SECRET = b"8f742231b10e8888abcd99yyyzzz85a5"


# -- the services the notices go to -------------------------------------------------------------
class Inbox:
    """aiosmtpd's handler: every message it is given."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = email.message_from_bytes(envelope.content, _class=EmailMessage,
                                          policy=email.policy.default)
        self.messages.append(parsed)
        return "250 OK"

    def about(self, digest: str) -> list[EmailMessage]:
        return [m for m in self.messages if digest in m.get_content()]


class Hook(BaseHTTPRequestHandler):
    """A webhook receiver: each POST's body kept with the status it was answered with; the
    first ``fail`` posts answered 500."""

    posts: list[tuple[int, dict[str, Any]]]
    fail: list[int]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status = 200
        if self.fail[0] > 0:
            self.fail[0] -= 1
            status = 500
        self.posts.append((status, body))
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


class Receiver:
    def __init__(self) -> None:
        self.posts: list[tuple[int, dict[str, Any]]] = []
        self.fail = [0]
        handler = type("H", (Hook,), {"posts": self.posts, "fail": self.fail})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/T0/B0/secret-token"

    def about(self, digest: str, status: int = 200) -> list[dict[str, Any]]:
        return [b for s, b in self.posts if s == status and digest in json.dumps(b)]


@pytest.fixture
def inbox() -> Iterator[tuple[Inbox, int]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    handler = Inbox()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield handler, port
    finally:
        controller.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    thread = threading.Thread(target=r.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield r
    finally:
        r.server.shutdown()
        r.server.server_close()


# -- helpers ------------------------------------------------------------------------------------
async def until(check: Callable[[], Awaitable[bool]], what: str, bound: int = 300) -> None:
    for _ in range(bound):
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"never: {what}")


def delivered(world: World, run_id: str, n: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        rows = await deliveries.of_run(world, run_id)
        return sum(1 for r in rows if r.delivered_at is not None) >= n
    return check


def click_body(value: str, user: str, action_id: str = "plangate_approve") -> bytes:
    payload = {"type": "block_actions", "user": {"id": user, "username": user},
               "actions": [{"type": "button", "action_id": action_id, "value": value}]}
    return urlencode({"payload": json.dumps(payload)}).encode()


def post(url: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, str]:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=60)
    try:
        conn.request("POST", u.path, body, {"Content-Type": "application/x-www-form-urlencoded",
                                            **headers})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def signed(body: bytes, secret: bytes = SECRET, at: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if at is None else at)
    return {"X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature(secret, stamp, body)}


async def click(url: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, Any]:
    status, text = await asyncio.to_thread(post, url + "chat/actions", body, headers)
    return status, json.loads(text) if text.startswith("{") else text


def button(hooked: dict[str, Any]) -> str:
    """The Approve button's value in a chat message."""
    actions = next(b for b in hooked["blocks"] if b["type"] == "actions")
    approve = next(e for e in actions["elements"] if e["action_id"] == "plangate_approve")
    return str(approve["value"])


# -- the tests ----------------------------------------------------------------------------------
async def test_a_card_is_delivered_once_per_channel_and_answered_from_the_chat_when_signed(
    client, settings, s3, inbox, receiver
):
    smtp, smtp_port = inbox
    bucket, key_a, key_b = unique("notify"), unique("a") + ".txt", unique("b") + ".txt"
    s3.create_bucket(Bucket=bucket)
    plan_a = {**put_once_approved("publish the figures", bucket, key_a, "final figures"),
              "on_behalf_of": "dana"}
    plan_b = put_once_approved("publish the draft", bucket, key_b, "draft figures")
    notify = Notify(email=Email("127.0.0.1", smtp_port, "plangate@example.org",
                                ("erin@example.org",)),
                    webhook=receiver.url, every_s=0.2, first_retry_s=0.2)
    options = PageOptions(notify=notify, chat=Chat(SECRET, {"U123": "erin"}))
    async with running_worker(client, settings) as h:
        world = World(h.settings.world)
        api = Plangate(client, h.settings, index=world)
        try:
            async with serving(api, [approver_key("erin")], port=0, options=options) as url:
                run_a = await api.start(plan_a)
                await until(delivered(world, run_a, 2), "run A's card sent by e-mail and webhook")
                (row,) = {r.digest for r in await deliveries.of_run(world, run_a)}
                digest = row

                # -- a second page process finds the notices claimed: nothing sent twice
                other = Deliveries(world, h.settings.temporal.task_queue, notify, url)
                assert await other.once() == 0
                (mail,) = smtp.about(digest)
                (hooked,) = receiver.about(digest)
                assert len(receiver.posts) == 1 and len(smtp.messages) == 1

                # -- the call in words, and a link that shows the card to a logged-in approver
                text = mail.get_content()
                assert mail["To"] == "erin@example.org" and "s3.put" in mail["Subject"]
                for said in (f"will call s3.put on s3://{bucket}/{key_a}", "effect write",
                             'body = "final figures"', "if_none_match", '{"absent": true}',
                             "dana", digest):
                    assert said in text, (said, text)
                found = re.search(r"(http://\S+/card\?\S+)", text)
                assert found is not None, text
                link = found.group(1)
                status, _, page = await asyncio.to_thread(request, link)
                assert status == 401 and 'name="token"' in page
                path = link[len(url) - 1:]
                status, headers, _ = await asyncio.to_thread(
                    request, url + "login", "POST",
                    {"token": approver_key("erin").login_token(), "next": path})
                assert status == 303 and headers["Location"] == path
                jar = "; ".join(c.split(";", 1)[0] for c in headers.get_all("Set-Cookie") or [])
                status, _, page = await asyncio.to_thread(request, link, headers={"Cookie": jar})
                assert status == 200, page
                assert f'data-digest="{digest}"' in page and f"s3://{bucket}/{key_a}" in page
                assert 'action="/answer"' in page and "You answer as <b>erin</b>" in page

                # -- the chat message: the same words, the link, buttons naming the card
                blocks = json.dumps(hooked["blocks"])
                assert f"s3://{bucket}/{key_a}" in blocks and "final figures" in blocks
                assert link in hooked["text"]
                value = button(hooked)
                assert json.loads(value) == {"run": run_a, "step": 1, "digest": digest}

                # -- refused, nothing applied: no signature, a wrong one, a stale one, a user
                # not listed; a signature opens no other route
                body = click_body(value, "U123")
                status, said = await click(url, body, {})
                assert status == 401 and "no request signature" in said["refused"]
                status, said = await click(url, body, signed(body, b"not the secret"))
                assert status == 401 and "does not verify" in said["refused"], said
                status, said = await click(url, body, signed(body, at=int(time.time()) - 301))
                assert status == 401 and "at most 300 s" in said["refused"], said
                stranger = click_body(value, "U999")
                status, said = await click(url, stranger, signed(stranger))
                assert status == 403, said
                assert said["refused"] == ("chat user U999 is not an approver this deployment "
                                           "lists (PLANGATE_CHAT_APPROVERS)")
                form = urlencode({"run_id": run_a, "step": 1, "digest": digest,
                                  "decision": "approve"}).encode()
                status, _ = await asyncio.to_thread(post, url + "answer", form, signed(form))
                assert status == 401
                rep = await api.report(run_a)
                assert rep.status == "awaiting_approval" and rep.approvals[0].answer is None
                assert not any(sent(await events(client, run_a)).values())
                assert (await scheduled(client, run_a)).get("s3.put", 0) == 0

                # -- the listed user's click, signed: approved as erin, the object written once
                right = signed(body)
                status, said = await click(url, body, right)
                assert status == 200 and said["ok"], said
                assert f"of run {run_a} recorded by erin" in said["text"]
                rep = await asyncio.wait_for(api.result(run_a), 60)
                assert rep.status == "succeeded" and rep.approvals[0].answer is not None
                assert rep.approvals[0].answer.by == "erin"
                assert s3.get_object(Bucket=bucket, Key=key_a)["Body"].read() == b"final figures"
                status, said = await click(url, body, right)  # the same request again
                assert status == 409, said
                assert (await scheduled(client, run_a))["s3.put"] == 1

                # -- the world moves before the click: a new card (sent too: its webhook after a
                # 500, tried again), no effect
                run_b = await api.start(plan_b)
                await until(delivered(world, run_b, 2), "run B's card sent")
                (first,) = {r.digest for r in await deliveries.of_run(world, run_b)}
                (hooked_b,) = receiver.about(first)
                receiver.fail[0] = 1
                s3.put_object(Bucket=bucket, Key=key_b, Body=b"someone else's figures")
                body = click_body(button(hooked_b), "U123")
                status, said = await click(url, body, signed(body))
                assert status == 200 and said["ok"], said
                await until(delivered(world, run_b, 4), "run B's new card sent")
                rows = await deliveries.of_run(world, run_b)
                second = next(r.digest for r in rows if r.digest != first)
                rep = await api.report(run_b)
                assert [(a.digest, a.status) for a in rep.approvals] == [
                    (first, "superseded"), (second, "pending")], rep.approvals
                assert rep.status == "awaiting_approval"
                hook_row = next(r for r in rows if (r.digest, r.channel) == (second, "webhook"))
                assert (hook_row.attempts, hook_row.last_error) == (2, "HTTP 500")
                assert len(receiver.about(second, 500)) == 1 and len(receiver.about(second)) == 1
                assert len(smtp.about(second)) == 1 and len(smtp.about(first)) == 1
                assert (await scheduled(client, run_b)).get("s3.put", 0) == 0
                got = s3.get_object(Bucket=bucket, Key=key_b)["Body"].read()
                assert got == b"someone else's figures"

                # -- Reject from the chat: the reason recorded names the chat's user
                (hooked_2,) = receiver.about(second)
                body = click_body(button(hooked_2), "U123", "plangate_reject")
                status, said = await click(url, body, signed(body))
                assert status == 200 and said["ok"], said
                rep = await asyncio.wait_for(api.result(run_b), 60)
                assert rep.status == "halted" and rep.failure is not None
                assert rep.failure.code == "approval_rejected"
                assert "rejected in chat by user U123 (erin)" in rep.failure.detail
                assert (await scheduled(client, run_b)).get("s3.put", 0) == 0
        finally:
            await world.close()


def test_slacks_worked_example_verifies():
    body = (b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&"
            b"channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&"
            b"command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2F"
            b"commands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id="
            b"398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
    assert signature(SECRET, "1531420618", body) == (
        "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503")
    mac = hmac.new(SECRET, b"v0:1531420618:" + body, hashlib.sha256).hexdigest()
    assert signature(SECRET, "1531420618", body) == "v0=" + mac


def test_the_settings_are_checked_and_the_secrets_never_shown():
    env = {"PLANGATE_NOTIFY_SMTP": "mail.example:25", "PLANGATE_NOTIFY_EMAIL_FROM": "p@x.org",
           "PLANGATE_NOTIFY_EMAIL_TO": "erin@x.org, frank@x.org",
           "PLANGATE_NOTIFY_WEBHOOK": "https://hooks.example/T0/B0/tok3n",
           "PLANGATE_UI_URL": "https://approve.example"}
    n = notify_settings(env)
    assert n is not None and n.channels == ("email", "webhook")
    assert n.email == Email("mail.example", 25, "p@x.org", ("erin@x.org", "frank@x.org"))
    assert n.ui_url == "https://approve.example/" and "tok3n" not in repr(n)
    assert notify_settings({}) is None and chat_settings({}) is None
    for bad, said in (
        ({"PLANGATE_NOTIFY_SMTP": "mail.example:25"}, "together"),
        ({**env, "PLANGATE_NOTIFY_SMTP": "mail.example"}, "is not host:port"),
        ({**env, "PLANGATE_NOTIFY_EMAIL_TO": "erin"}, "'erin' (PLANGATE_NOTIFY_EMAIL_FROM"),
        ({**env, "PLANGATE_NOTIFY_WEBHOOK": "ftp://tok3n"}, "PLANGATE_NOTIFY_WEBHOOK: the value"),
    ):
        with pytest.raises(ConfigurationError, match=re.escape(said)) as e:
            notify_settings(bad)
        assert "tok3n" not in str(e.value)
    chat = chat_settings({"PLANGATE_CHAT_SIGNING_SECRET": "s3cr3t",
                          "PLANGATE_CHAT_APPROVERS": "U123:erin,U456:frank"})
    assert chat is not None and chat.approvers == {"U123": "erin", "U456": "frank"}
    assert "s3cr3t" not in repr(chat)
    with pytest.raises(ConfigurationError, match="U456 answers as 'frank', whose key the page"):
        chat_approvers_held(chat, frozenset({"erin"}))
    for bad_chat, said in (({"PLANGATE_CHAT_APPROVERS": "U1:erin"}, "together"),
                           ({"PLANGATE_CHAT_SIGNING_SECRET": "s", "PLANGATE_CHAT_APPROVERS":
                             "erin"}, "'erin' is not USERID:APPROVER")):
        with pytest.raises(ConfigurationError, match=re.escape(said)):
            chat_settings(bad_chat)


def test_plangate_ui_refuses_half_given_notices_in_one_line(stack, monkeypatch, capsys):
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PLANGATE_NOTIFY_SMTP", "mail.example:25")
    assert main(["ui"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("plangate: e-mail notices need PLANGATE_NOTIFY_SMTP") and (
        err.count("\n") == 1), err
    monkeypatch.delenv("PLANGATE_NOTIFY_SMTP")
    monkeypatch.setenv("PLANGATE_CHAT_SIGNING_SECRET", "s3cr3t")
    monkeypatch.setenv("PLANGATE_CHAT_APPROVERS", "U123:mallory")
    assert main(["ui"]) == 2
    err = capsys.readouterr().err
    assert "U123 answers as 'mallory', whose key the page does not hold" in err, err
    assert "s3cr3t" not in err and err.count("\n") == 1


async def test_the_plangate_ui_command_sends_the_cards_its_environment_names(
    client, settings, stack, s3, receiver, tmp_path
):
    bucket, key = unique("notify-cli"), unique("c") + ".txt"
    s3.create_bucket(Bucket=bucket)
    log = tmp_path / "ui.log"
    async with running_worker(client, settings) as h:
        env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue,
               "PLANGATE_NOTIFY_WEBHOOK": receiver.url,
               "PLANGATE_UI_URL": "https://approve.example/"}
        api = Plangate(client, h.settings)
        async with ui_process(env, log) as url:
            # no chat settings: no callback route (nothing there for a stranger to call)
            body = click_body("{}", "U123")
            status, _ = await asyncio.to_thread(post, url + "chat/actions", body, signed(body))
            assert status == 404
            run_id = await api.start(put_once_approved("publish", bucket, key, "figures"))
            digest = (await waiting(api, run_id, 1)).record.digest

            async def posted() -> bool:
                return bool(receiver.about(digest))
            await until(posted, "the card POSTed to the webhook")
            (hooked,) = receiver.about(digest)
            assert "https://approve.example/card?run=" in hooked["text"], hooked["text"]
            await api.cancel(run_id, reason="test over")
    assert "secret-token" not in await asyncio.to_thread(log.read_text)  # the URL's token


def test_a_cards_words_cannot_link_mention_or_format_in_the_chat():
    from datetime import UTC, datetime, timedelta

    from plangate.client.pending import PendingCard
    from plangate.plans.model import Effect
    from plangate.records.approvals import ApprovalCard, ApprovalRecord
    from plangate.servers.notify import message

    now = datetime(2026, 12, 8, 2, 0, tzinfo=UTC)
    card = ApprovalCard(run_id="r-1", plan_version=1, step=1, tool="s3.put", effect=Effect.MONEY,
                        args={"bucket": "b", "key": "<!channel> <https://evil.example|ok> `x`"
                              "\u202e*bold*", "body": "a\nb"},
                        issued_at=now, expires_at=now + timedelta(hours=1))
    p = PendingCard("r-1", "goal <@U999>", ApprovalRecord(
        step=1, plan_version=1, digest=card.digest(), expires_at=card.expires_at, card=card))
    msg = message.chat(p, "https://approve.example/card?run=r-1&step=1&digest=" + card.digest())
    sections = [b["text"]["text"] for b in msg["blocks"] if b["type"] == "section"]
    shown = "\n".join(sections)
    for raw in ("<!channel>", "<https://evil", "<@U999>", "`x`", "\u202e", "a\nb"):
        assert raw not in shown, raw
    assert "&lt;!channel&gt;" in shown and "\\u0060x\\u0060" in shown and "\\u202e" in shown
    assert "&lt;@U999&gt;" in shown and "effect money (irreversible)" in shown
    # every untrusted line sits inside a code span: no *bold*, no _italic_ is rendered
    assert all(line.startswith("`") and line.endswith("`")
               for s in sections[:-1] for line in s.split("\n")[1:]), sections
    assert sections[-1] == ("<https://approve.example/card?run=r-1&amp;step=1&amp;digest="
                            f"{card.digest()}|Open the card on the approval page>")
    mail = message.email(p, "https://approve.example/card", Email("h", 25, "p@x.org",
                                                                  ("e@x.org",)))
    assert "\u202e" not in mail.get_content() and "\\u202e" in mail.get_content()


async def test_a_notice_is_claimed_by_one_process_retried_when_due_and_never_after_delivery(
    world
):
    from datetime import UTC, datetime, timedelta

    from plangate.world.deliveries import Notice

    deployment = unique("claims")
    n = Notice(unique("d"), "webhook", deployment, "r-1", 1,
               datetime.now(UTC) + timedelta(hours=1))
    # eight processes at once: one holds it
    got = await asyncio.gather(*(deliveries.claim(world, n, 60, 3) for _ in range(8)))
    assert sorted(got, key=str) == [0, *[None] * 7], got
    assert await deliveries.claim(world, n, 60, 3) is None  # held: the lease
    await deliveries.settle(world, n, "HTTP 500", 3600)
    assert await deliveries.claim(world, n, 60, 3) is None  # failed: not due for an hour
    pool = await world.pool()
    async with pool.connection() as conn:  # the hour has passed
        await conn.execute("UPDATE plangate.deliveries SET next_at = now() "
                           "WHERE digest = %s", (n.digest,))
    assert await deliveries.claim(world, n, 60, 3) == 1
    await deliveries.settle(world, n, None, 0)
    assert await deliveries.claim(world, n, 60, 10) is None  # delivered: never again
    assert await deliveries.settled(world, deployment, 3) == {(n.digest, "webhook")}
    (row,) = [r for r in await deliveries.of_run(world, "r-1") if r.digest == n.digest]
    assert (row.attempts, row.last_error) == (2, "HTTP 500") and row.delivered_at
    # out of tries: three failures, then no claim takes it
    m = Notice(unique("d"), "email", deployment, "r-1", 1, n.expires_at)
    for tried in range(3):
        assert await deliveries.claim(world, m, 60, 3) == tried
        await deliveries.settle(world, m, "SMTP 451", 0)
    assert await deliveries.claim(world, m, 60, 3) is None
    assert (m.digest, "email") in await deliveries.settled(world, deployment, 3)
