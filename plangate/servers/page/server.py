"""The page served by uvicorn on the caller's event loop (its Temporal calls are awaited where
they are made), behind ``Logged``: the security headers of every response, and the log.

The log never holds a token: a request is shown by its method and the page's route only; a
query string (``?token=``, ``?%74oken=``, ``?TOKEN=``, a bare value) and any other path are
written as placeholders, never as text a client sent, in whatever encoding. uvicorn's own
lines are written as their templates, none of their values (an unparsable request line)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
from collections.abc import AsyncIterator, Generator, Sequence
from contextlib import asynccontextmanager

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from plangate.client.api import Plangate
from plangate.records.signing import SigningKey
from plangate.servers.notify.loop import Deliveries
from plangate.servers.notify.settings import chat_approvers_held
from plangate.servers.page.answers import Answers
from plangate.servers.page.app import Page, application
from plangate.servers.page.chat import ChatActions
from plangate.servers.page.gate import Gate, Throttle
from plangate.servers.page.options import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_TEMPORAL_UI,
    PageOptions,
)
from plangate.servers.page.sessions import Sessions
from plangate.servers.page.views import Links

ROUTES = frozenset({"/", "/login", "/logout", "/answer", "/run", "/run.json", "/card",
                    "/chat/actions",
                    "/static/page.css", "/static/page.js"})
_METHODS = frozenset({"GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH"})
_HEADERS = [(k.encode(), v.encode()) for k, v in (
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    # same-origin, not no-referrer: with no referrer, a browser sends `Origin: null`
    ("Referrer-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    # scripts and styles from the page's own files only: nothing inline runs
    ("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; "
     "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
)]


def _say(line: str) -> None:
    sys.stderr.write(f"plangate ui: {line}\n")
    sys.stderr.flush()


class Logged:
    """Every response with the page's security headers, and a line in the log."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = "-"

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = str(int(message["status"]))
                message["headers"] = [*message.get("headers", ()), *_HEADERS]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            method = scope.get("method", "")
            path = scope.get("path", "")
            _say(" ".join((
                (scope.get("client") or ("-",))[0],
                method if method in _METHODS else "-",
                (path if path in ROUTES else "<other path>")
                + ("?<query>" if scope.get("query_string") else ""),
                f"HTTP/{scope.get('http_version', '-')}",
                status,
            )))


class _Templates(logging.Handler):
    """uvicorn's lines as their templates: none of the values a client sent."""

    def emit(self, record: logging.LogRecord) -> None:
        _say(str(record.msg).split("%", 1)[0].strip())


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the command's event loop keeps its own signals (Ctrl+C ends it as before)


def _listening(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


@asynccontextmanager
async def serving(
    api: Plangate, keys: Sequence[SigningKey], host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT, throttle: Throttle | None = None,
    temporal_ui: str = DEFAULT_TEMPORAL_UI, options: PageOptions | None = None,
) -> AsyncIterator[str]:
    """The page for the people whose ``keys`` it holds, served on this event loop until the
    block ends; yields its URL. ``port`` 0: a free port. ``OSError`` when the address cannot be
    listened on. ``temporal_ui``: the Temporal Web UI's address, for the runs' links.
    ``options.notify``: each card is sent to its channels by a loop beside the page, which needs
    the deployment's Postgres (``api.index``: ``ValueError`` without it)."""
    options = options or PageOptions()
    if options.notify is not None and api.index is None:
        raise ValueError("notices need the deployment's Postgres (PLANGATE_DATABASE_URL): they "
                         "are claimed and recorded in plangate.deliveries")
    if options.chat is not None:  # each chat user answers as a key held here
        chat_approvers_held(options.chat, frozenset(k.name for k in keys))
    chat = None if options.chat is None else ChatActions(api, options.chat)
    page = Page(api, Gate(keys), Sessions(options.session_s, options.clock), throttle or Throttle(),
                Links(temporal_ui, api.settings.temporal.namespace), Answers(api), chat)
    quiet = logging.getLogger("uvicorn")
    quiet.handlers[:] = [_Templates(logging.WARNING)]
    quiet.propagate = False
    sock = _listening(host, port)
    server = _Server(uvicorn.Config(
        Logged(application(page)), http="h11", lifespan="off", access_log=False,
        log_config=None, proxy_headers=False, server_header=False, date_header=False,
        timeout_keep_alive=5, timeout_graceful_shutdown=5,
    ))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    notices: asyncio.Task[None] | None = None  # the delivery loop, where cards are sent
    try:
        while not server.started:
            if task.done():
                task.result()  # why it could not start
                raise OSError(f"the page did not start on {host}:{port}")
            await asyncio.sleep(0.02)
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{bound}/"
        if options.notify is not None and api.index is not None:
            loop = Deliveries(api.index, api.settings.temporal.task_queue, options.notify, url)
            notices = asyncio.create_task(loop.run())
        yield url
    finally:
        if notices is not None:
            notices.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await notices
        server.should_exit = True
        await task
        sock.close()


async def run_ui(api: Plangate, keys: Sequence[SigningKey], host: str, port: int,
                 temporal_ui: str = DEFAULT_TEMPORAL_UI,
                 options: PageOptions | None = None) -> int:
    """Serve the page until interrupted."""
    async with serving(api, keys, host, port, temporal_ui=temporal_ui, options=options) as url:
        s = api.settings.temporal
        names = ", ".join(k.name for k in keys)
        print(f"plangate ui: serving {url} (cards of task queue {s.task_queue} in namespace "
              f"{s.namespace}) for {names}; each logs in with their key's login "
              "token (plangate key show FILE)", flush=True)
        o = options or PageOptions()
        if o.notify is not None:
            print(f"plangate ui: sends each card by {' and '.join(o.notify.channels)}, linking "
                  f"{o.notify.ui_url or url}", flush=True)
        if o.chat is not None:
            print(f"plangate ui: takes signed chat clicks at {url}chat/actions from "
                  f"{len(o.chat.approvers)} listed users", flush=True)
        if host not in ("127.0.0.1", "localhost", "::1"):
            print(f"plangate ui: warning: listening on {host} over plain HTTP: the token and "
                  "the session cross the network in clear; put a TLS proxy in front",
                  file=sys.stderr, flush=True)
        await asyncio.Event().wait()
    return 0
