"""What ``plangate ui`` is given before it serves: the approvers' keys, the Temporal Web UI's
address, how long a session lasts, where cards are sent and whose chat clicks are taken
(``servers.notify.settings``), and whether the ``page`` extra is installed. Imports no web
framework, so a missing extra is said in one line before anything loads it."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from plangate.errors import ConfigurationError
from plangate.records.signing import SigningKey
from plangate.servers.notify.settings import Chat, Notify, chat_settings, notify_settings
from plangate.world.settings import APPROVER_KEY_VAR, TEMPORAL_UI_VAR, Identity

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765
DEFAULT_TEMPORAL_UI = "http://localhost:8233"  # the dev server's Web UI
SESSION_VAR = "PLANGATE_UI_SESSION_S"
DEFAULT_SESSION_S = 8 * 3600  # a working day; then the login token again
EXTRA = ("starlette", "uvicorn", "jinja2")  # the modules of the ``page`` extra


@dataclass(frozen=True)
class PageOptions:
    session_s: float = DEFAULT_SESSION_S  # from login; then the login form again
    clock: Callable[[], float] = time.monotonic  # the sessions' (a test's own, to expire one)
    notify: Notify | None = None  # where each card is sent (PLANGATE_NOTIFY_*)
    chat: Chat | None = None  # a chat's signed callback (PLANGATE_CHAT_*)


def ui_keys(identity: Identity) -> tuple[SigningKey, ...]:
    """The keys of the people the page lets in (``PLANGATE_APPROVER_KEY``); a clear error when
    there are none."""
    if not identity.approver_keys:
        raise ValueError(
            f"plangate ui needs {APPROVER_KEY_VAR}: the key files of the people who answer "
            "cards here, separated by commas (`plangate key new NAME` makes one; each person "
            "logs in with the login token `plangate key show FILE` prints)"
        )
    return identity.approver_keys


def temporal_ui_arg(raw: str) -> str:
    """The Temporal Web UI's address, checked: an http(s) URL (``ValueError`` otherwise)."""
    u = urlsplit(raw.strip())
    if u.scheme not in ("http", "https") or not u.netloc or u.query or u.fragment:
        raise ValueError(f"the Temporal Web UI's address {raw!r} (--temporal-ui, "
                         f"{TEMPORAL_UI_VAR}) is not an http(s) URL: give one such as "
                         f"{DEFAULT_TEMPORAL_UI}")
    return raw.strip().rstrip("/")


def ui_options(env: Mapping[str, str]) -> PageOptions:
    """The page's options from the environment; ``ConfigurationError`` (one line) when the
    ``page`` extra is missing or ``PLANGATE_UI_SESSION_S`` is not a positive number."""
    missing = next((m for m in EXTRA if importlib.util.find_spec(m) is None), None)
    if missing is not None:
        raise ConfigurationError(f"ui: the approval page's web server is not installed "
                                 f"({missing} is missing): pip install 'plangate[page]'")
    notify, chat = notify_settings(env), chat_settings(env)
    raw = env.get(SESSION_VAR, "").strip()
    if not raw:
        return PageOptions(notify=notify, chat=chat)
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 30 * 86400:
        raise ConfigurationError(f"{SESSION_VAR}={raw!r}: a session's length must be a "
                                 "number of seconds above 0 and at most 30 days")
    return PageOptions(session_s=seconds, notify=notify, chat=chat)
