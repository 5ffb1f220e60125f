"""Sending one notice: an e-mail over SMTP, a JSON POST to a webhook. Each is bounded by a
timeout and fails with ``SendFailed``, whose message is what the deliveries table records: never
the webhook's address (it holds a token) nor anything the server sent back but its status."""

from __future__ import annotations

import asyncio
import json
import smtplib
import urllib.error
import urllib.request
from email.message import EmailMessage
from typing import Any

from plangate.servers.notify.settings import Email


class SendFailed(Exception):
    """A notice not sent, in words safe to record."""


def _smtp(e: Email, msg: EmailMessage, timeout_s: float) -> None:
    try:
        with smtplib.SMTP(e.host, e.port, timeout=timeout_s) as s:
            refused = s.send_message(msg)
    except smtplib.SMTPResponseException as x:
        raise SendFailed(f"SMTP {x.smtp_code}") from None
    except smtplib.SMTPRecipientsRefused:
        raise SendFailed("SMTP: every recipient refused") from None
    except (OSError, smtplib.SMTPException) as x:
        raise SendFailed(f"SMTP: {type(x).__name__}") from None
    if refused:
        raise SendFailed(f"SMTP: {len(refused)} recipients refused")


async def send_email(e: Email, msg: EmailMessage, timeout_s: float) -> None:
    await asyncio.to_thread(_smtp, e, msg, timeout_s)


def _post(url: str, body: bytes, timeout_s: float) -> None:
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            r.read(1 << 16)
    except urllib.error.HTTPError as x:
        raise SendFailed(f"HTTP {x.code}") from None
    except (OSError, ValueError) as x:
        raise SendFailed(f"webhook: {type(x).__name__}") from None


async def post_webhook(url: str, message: dict[str, Any], timeout_s: float) -> None:
    body = json.dumps(message, ensure_ascii=False).encode()
    await asyncio.to_thread(_post, url, body, timeout_s)
