"""Where the approval page sends each card it finds (``PLANGATE_NOTIFY_*``) and whose clicks in
a chat it takes (``PLANGATE_CHAT_*``), read from the environment and checked before the page
serves: a setting that is wrong or half given is one line naming it. The webhook's address and
the chat's signing secret are secrets: never in a ``repr``, an error or the log."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from plangate.errors import ConfigurationError

UI_URL_VAR = "PLANGATE_UI_URL"
SMTP_VAR = "PLANGATE_NOTIFY_SMTP"
EMAIL_FROM_VAR = "PLANGATE_NOTIFY_EMAIL_FROM"
EMAIL_TO_VAR = "PLANGATE_NOTIFY_EMAIL_TO"
WEBHOOK_VAR = "PLANGATE_NOTIFY_WEBHOOK"
SECRET_VAR = "PLANGATE_CHAT_SIGNING_SECRET"
CHAT_APPROVERS_VAR = "PLANGATE_CHAT_APPROVERS"


@dataclass(frozen=True)
class Email:
    host: str
    port: int
    sender: str
    to: tuple[str, ...]


@dataclass(frozen=True)
class Notify:
    """The channels each card is sent to, and how the loop paces itself."""

    ui_url: str | None = None  # the page's public address, for each notice's link
    email: Email | None = None
    webhook: str | None = field(default=None, repr=False)  # a Slack webhook URL holds a token
    every_s: float = 5.0  # how often the runs index is read for cards not yet sent
    first_retry_s: float = 2.0  # a failed attempt is tried again after this, doubled each time
    max_retry_s: float = 600.0
    most: int = 10  # attempts per notice; then it is left failed (its last error recorded)
    lease_s: float = 60.0  # a claim's hold: a process that died mid-send frees it after this
    send_timeout_s: float = 10.0

    @property
    def channels(self) -> tuple[str, ...]:
        return tuple(c for c, on in (("email", self.email), ("webhook", self.webhook)) if on)


@dataclass(frozen=True)
class Chat:
    """A chat's interactive callback: the platform's signing secret and its users who approve,
    each as the approver (a key the page holds) they answer as."""

    secret: bytes = field(repr=False)
    approvers: Mapping[str, str]  # platform user id -> approver name
    max_age_s: float = 300.0  # a signed request older (or newer) than this is refused


def _url(var: str, raw: str) -> str:
    u = urlsplit(raw)
    if u.scheme not in ("http", "https") or not u.netloc:
        shown = raw if var == UI_URL_VAR else "the value given"  # a webhook URL is secret
        raise ConfigurationError(f"{var}: {shown!s} is not an http(s) URL")
    return raw


def _email(env: Mapping[str, str]) -> Email | None:
    smtp, sender = env.get(SMTP_VAR, "").strip(), env.get(EMAIL_FROM_VAR, "").strip()
    to = tuple(a.strip() for a in env.get(EMAIL_TO_VAR, "").split(",") if a.strip())
    if not (smtp or sender or to):
        return None
    if not (smtp and sender and to):
        raise ConfigurationError(f"e-mail notices need {SMTP_VAR} (host:port), {EMAIL_FROM_VAR} "
                                 f"and {EMAIL_TO_VAR} (addresses separated by commas) together")
    host, _, port = smtp.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigurationError(f"{SMTP_VAR}={smtp!r} is not host:port (e.g. mail.example:25)")
    for a in (sender, *to):
        if "@" not in a or any(c in a for c in "\r\n<>,; "):
            raise ConfigurationError(f"{a!r} ({EMAIL_FROM_VAR}/{EMAIL_TO_VAR}) is not an "
                                     "e-mail address")
    return Email(host.strip("[]"), int(port), sender, to)


def notify_settings(env: Mapping[str, str]) -> Notify | None:
    """The channels the environment names; None when it names none."""
    email, webhook = _email(env), env.get(WEBHOOK_VAR, "").strip() or None
    ui_url = env.get(UI_URL_VAR, "").strip() or None
    if ui_url is not None:
        ui_url = _url(UI_URL_VAR, ui_url).rstrip("/") + "/"
    if webhook is not None:
        _url(WEBHOOK_VAR, webhook)
    if email is None and webhook is None:
        return None
    return Notify(ui_url=ui_url, email=email, webhook=webhook)


def chat_settings(env: Mapping[str, str]) -> Chat | None:
    """The chat callback's secret and approvers; None when neither is given."""
    secret = env.get(SECRET_VAR, "").strip()
    raw = env.get(CHAT_APPROVERS_VAR, "").strip()
    if not (secret or raw):
        return None
    if not (secret and raw):
        raise ConfigurationError(f"the chat callback needs {SECRET_VAR} (the app's signing "
                                 f"secret) and {CHAT_APPROVERS_VAR} (USERID:APPROVER,...) "
                                 "together")
    approvers: dict[str, str] = {}
    for part in raw.split(","):
        user, _, name = part.strip().partition(":")
        if not user or not name or not user.isalnum():
            raise ConfigurationError(f"{CHAT_APPROVERS_VAR}: {part.strip()!r} is not "
                                     "USERID:APPROVER (e.g. U0123ABCD:erin)")
        if user in approvers:
            raise ConfigurationError(f"{CHAT_APPROVERS_VAR}: user {user} is listed twice")
        approvers[user] = name
    return Chat(secret.encode(), approvers)


def chat_approvers_held(chat: Chat, names: frozenset[str]) -> None:
    """Every chat user answers as an approver whose key the page holds (else the click could
    not be signed): ``ConfigurationError`` naming the first that does not."""
    for user, name in chat.approvers.items():
        if name not in names:
            raise ConfigurationError(f"{CHAT_APPROVERS_VAR}: {user} answers as {name!r}, whose "
                                     "key the page does not hold (PLANGATE_APPROVER_KEY)")
