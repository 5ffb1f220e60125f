"""A chat's interactive callback, ``POST /chat/actions``: an Approve or Reject button clicked in
a message the delivery loop sent (``servers.notify.message.chat``). The one route of the page
without a session or a CSRF token: its proof is the platform's request signature (Slack's
scheme: ``X-Slack-Signature: v0=hex(HMAC-SHA256(secret, "v0:" + X-Slack-Request-Timestamp +
":" + raw body))``, the timestamp within ``max_age_s`` of this clock, compared in constant
time) and the clicking user, who must be listed (``PLANGATE_CHAT_APPROVERS``) as an approver
whose key the page holds. Then the answer is signed with that approver's key and sent as the
page's own Approve is (``Plangate.approve``: the card read again from the run first). Anything
else is refused with its reason and nothing applied: no signature or a wrong one, a stale
timestamp (401), a user not listed (403), a run not of this queue (404), a card no longer
waiting (409)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from plangate.client.api import AnswerRefused, Plangate, RunEnded, UnknownRun
from plangate.records.approvals import ApprovalDecision
from plangate.servers.notify.message import APPROVE, REJECT
from plangate.servers.notify.settings import Chat

CALL_TIMEOUT_S = 60.0  # the run's Temporal calls
MAX_BODY_BYTES = 256 * 1024  # a block action's payload carries the whole message
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


class ChatRefusal(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """Slack's request signature of ``body`` sent at ``timestamp``."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret, base, hashlib.sha256).hexdigest()


def verify(chat: Chat, headers: Mapping[str, str], body: bytes, now: float) -> None:
    """``ChatRefusal`` (401) unless the body is signed with the chat's secret, recently."""
    stamp, given = headers.get("x-slack-request-timestamp", ""), headers.get(
        "x-slack-signature", "")
    if not stamp or not given:
        raise ChatRefusal(401, "no request signature (X-Slack-Signature and "
                          "X-Slack-Request-Timestamp are required)")
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 12):
        raise ChatRefusal(401, "the request timestamp is not a number of seconds")
    if abs(now - int(stamp)) > chat.max_age_s:
        raise ChatRefusal(401, f"the request timestamp is {int(now - int(stamp))} s from this "
                          f"server's clock: at most {chat.max_age_s:g} s is taken")
    if not hmac.compare_digest(given.encode(), signature(chat.secret, stamp, body).encode()):
        raise ChatRefusal(401, "the request signature does not verify with the signing secret")


@dataclass(frozen=True)
class Click:
    user: str
    decision: ApprovalDecision
    run_id: str
    step: int
    digest: str


def click(body: bytes) -> Click:
    """The button clicked, from the form's ``payload`` (a block action); ``ChatRefusal`` (400)
    naming what is malformed."""
    try:
        form = parse_qs(body.decode("utf-8"), max_num_fields=4, errors="strict")
        payload: Any = json.loads(form["payload"][0])
        action = payload["actions"][0]
        value = json.loads(action["value"])
        user, action_id = payload["user"]["id"], action["action_id"]
        run_id, step, digest = value["run"], value["step"], value["digest"]
    except (UnicodeDecodeError, ValueError, KeyError, IndexError, TypeError):
        raise ChatRefusal(400, "not a block action of a plangate card (payload, actions, "
                          "user, value)") from None
    if payload.get("type") != "block_actions" or action_id not in (APPROVE, REJECT):
        raise ChatRefusal(400, "not a plangate Approve or Reject button")
    if not (isinstance(user, str) and isinstance(run_id, str) and 0 < len(run_id) <= 1000
            and type(step) is int and step >= 0 and isinstance(digest, str)
            and _DIGEST.match(digest)):
        raise ChatRefusal(400, "the button's run, step or digest is malformed")
    decision = ApprovalDecision.APPROVE if action_id == APPROVE else ApprovalDecision.REJECT
    return Click(user, decision, run_id, step, digest)


def reject_reason(c: Click, name: str) -> str:
    """A chat's Reject carries no text: the reason recorded (and signed) names where and who."""
    return f"rejected in chat by user {c.user} ({name})"


@dataclass
class ChatActions:
    api: Plangate
    chat: Chat
    clock: Callable[[], float] = time.time

    async def __call__(self, request: Request) -> Response:
        try:
            return await self._answer(request)
        except ChatRefusal as r:
            return JSONResponse({"ok": False, "refused": r.reason}, r.status)

    async def _answer(self, request: Request) -> Response:
        try:
            length = int(request.headers.get("content-length", ""))
        except ValueError:
            raise ChatRefusal(411, "a callback needs its Content-Length") from None
        if not 0 <= length <= MAX_BODY_BYTES:
            raise ChatRefusal(413, f"a callback is at most {MAX_BODY_BYTES} bytes")
        body = await request.body()
        verify(self.chat, request.headers, body, self.clock())  # before anything is read
        c = click(body)
        name = self.chat.approvers.get(c.user)
        if name is None:
            raise ChatRefusal(403, f"chat user {c.user} is not an approver this deployment "
                              "lists (PLANGATE_CHAT_APPROVERS)")
        queue = self.api.settings.temporal.task_queue
        try:
            ours = await asyncio.wait_for(self.api.of_this_deployment(c.run_id), CALL_TIMEOUT_S)
        except UnknownRun:
            ours = False
        if not ours:
            raise ChatRefusal(404, f"no run {c.run_id} waits on task queue {queue}: the page "
                              "answers only its own cards")
        try:
            receipt = await asyncio.wait_for(
                self.api.approve(c.run_id, c.step, c.digest, by=name)
                if c.decision is ApprovalDecision.APPROVE
                else self.api.reject(c.run_id, c.step, c.digest, by=name,
                                     reason=reject_reason(c, name)), CALL_TIMEOUT_S)
        except (AnswerRefused, RunEnded, UnknownRun) as e:
            raise ChatRefusal(409, str(e)) from None
        then = ("the step reads the world again before it acts; if what its probes observe "
                "changed, a new card is sent" if receipt.decision is ApprovalDecision.APPROVE
                else "the step follows its on_unmet")
        return JSONResponse({"ok": True, "text": f"{receipt.decision} of step {receipt.step} "
                             f"of run {c.run_id} recorded by {name}: {then}"})
