"""A small tickets HTTP service: the system the ``plangate_tickets`` example guards.

Stdlib only: a ``ThreadingHTTPServer`` on 127.0.0.1 (a free port unless given), an in-memory
store, served from a daemon thread.

- ``GET /tickets/{id}``: the ticket as JSON (``id``, ``title``, ``status``, ``assignee``,
  ``version``, ``etag``), with its ``ETag`` header; 404 for an unknown id.
- ``PATCH /tickets/{id}`` with a JSON object of ``status`` (``open`` | ``in_progress`` |
  ``closed``) and/or ``assignee``: the ticket after the write, with its new ``ETag``.
  ``If-Match``: the write lands only while the ticket is still at that ETag, else 412 (the
  current ETag in the body). ``Idempotency-Key``: a write replayed under a key this ticket has
  already seen is answered with the first answer and not applied again (the same key with other
  fields: 422). 400 for fields it does not know; 404 for an unknown id.

Every request is in ``log`` (method, path, status, the headers that matter, the body), and so
is every change "another writer" makes: ``write`` now, or ``interleave`` just before (or just
after) the next PATCH of a ticket is handled, the way a concurrent writer slips in between a
check and a write.

    with TicketsService() as svc:
        svc.add("T-1", "Printer on fire")
        os.environ["TICKETS_URL"] = svc.url

Run it on its own: ``python tickets_service.py [--port 8775]`` (it holds ticket ``T-1`` from
the start; not 8765, which ``plangate ui`` takes).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal
from urllib.parse import unquote

STATUSES = ("open", "in_progress", "closed")
FIELDS = ("status", "assignee")
OTHER_WRITER = "other writer"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_PATH = re.compile(r"^/tickets/([^/?#]+)$")


@dataclass
class Ticket:
    id: str
    title: str
    status: str = "open"
    assignee: str | None = None
    version: int = 1
    # Idempotency-Key -> (the fields it sent, the answer it got)
    seen: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)

    @property
    def etag(self) -> str:
        return f'"{self.id}.{self.version}"'

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "title": self.title, "status": self.status,
            "assignee": self.assignee, "version": self.version, "etag": self.etag,
        }


@dataclass(frozen=True)
class Logged:
    """One request the service answered, or one change another writer made."""

    method: str
    ticket_id: str
    status: int
    by: str = "http"  # "http": a request; OTHER_WRITER: a change made through the hooks
    if_match: str | None = None
    idempotency_key: str | None = None
    body: Any = None
    replayed: bool = False  # answered from the Idempotency-Key store, not applied again


@dataclass(frozen=True)
class _Interleaved:
    changes: dict[str, Any]
    when: Literal["before", "after"]


class TicketsService:
    def __init__(self, port: int = 0) -> None:
        self._port = port
        self._lock = threading.Lock()
        self._tickets: dict[str, Ticket] = {}
        self._pending: dict[str, list[_Interleaved]] = {}
        self._log: list[Logged] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- the store ------------------------------------------------------------------------------
    def add(self, ticket_id: str, title: str, status: str = "open") -> dict[str, Any]:
        if not _ID.match(ticket_id) or status not in STATUSES:
            raise ValueError(f"bad ticket {ticket_id!r} / {status!r}")
        with self._lock:
            t = self._tickets[ticket_id] = Ticket(ticket_id, title, status)
            return t.as_json()

    def ticket(self, ticket_id: str) -> dict[str, Any]:
        with self._lock:
            return self._tickets[ticket_id].as_json()

    @property
    def log(self) -> list[Logged]:
        with self._lock:
            return list(self._log)

    def requests(self, method: str, ticket_id: str | None = None) -> list[Logged]:
        """The HTTP requests of ``method`` (for one ticket), in the order they were answered."""
        return [
            e for e in self.log
            if e.by == "http" and e.method == method and ticket_id in (None, e.ticket_id)
        ]

    # -- another writer -------------------------------------------------------------------------
    def write(self, ticket_id: str, **changes: Any) -> dict[str, Any]:
        """Another writer changes the ticket now."""
        with self._lock:
            return self._apply_other(self._tickets[ticket_id], changes)

    def interleave(
        self, ticket_id: str, when: Literal["before", "after"] = "before", **changes: Any
    ) -> None:
        """Another writer changes the ticket just ``before`` the next PATCH of it is handled
        (after whatever read came first: between the check and the write), or just ``after``
        it (between the write and the read that verifies it). Once."""
        _fields(changes)
        with self._lock:
            self._pending.setdefault(ticket_id, []).append(_Interleaved(changes, when))

    def _apply_other(self, t: Ticket, changes: dict[str, Any]) -> dict[str, Any]:
        _apply(t, _fields(changes))
        self._log.append(Logged("PATCH", t.id, 200, by=OTHER_WRITER, body=changes))
        return t.as_json()

    def _take(self, ticket_id: str, when: str) -> list[_Interleaved]:
        pending = self._pending.get(ticket_id, [])
        due = [p for p in pending if p.when == when]
        self._pending[ticket_id] = [p for p in pending if p.when != when]
        return due

    # -- requests -------------------------------------------------------------------------------
    def handle_get(self, ticket_id: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            t = self._tickets.get(ticket_id)
            status, body = (200, t.as_json()) if t else (404, {"error": f"no ticket {ticket_id}"})
            self._log.append(Logged("GET", ticket_id, status))
            return status, body

    def handle_patch(
        self, ticket_id: str, body: Any, if_match: str | None, key: str | None
    ) -> tuple[int, dict[str, Any]]:
        with self._lock:
            status, answer, replayed = self._patch(ticket_id, body, if_match, key)
            self._log.append(
                Logged("PATCH", ticket_id, status, if_match=if_match, idempotency_key=key,
                       body=body, replayed=replayed)
            )
            t = self._tickets.get(ticket_id)
            if t is not None and status == 200 and not replayed:
                for p in self._take(ticket_id, "after"):
                    self._apply_other(t, p.changes)
            return status, answer

    def _patch(
        self, ticket_id: str, body: Any, if_match: str | None, key: str | None
    ) -> tuple[int, dict[str, Any], bool]:
        t = self._tickets.get(ticket_id)
        if t is None:
            return 404, {"error": f"no ticket {ticket_id}"}, False
        for p in self._take(ticket_id, "before"):
            self._apply_other(t, p.changes)
        try:
            changes = _fields(body)
        except ValueError as e:
            return 400, {"error": str(e)}, False
        if key is not None and key in t.seen:
            sent, answer = t.seen[key]
            if sent != changes:
                return 422, {"error": f"Idempotency-Key {key} was used for {sent}"}, False
            return 200, answer, True
        if if_match is not None and if_match != t.etag:
            return 412, {"error": f"ticket {t.id} is at {t.etag}, not {if_match}",
                         "etag": t.etag}, False
        _apply(t, changes)
        answer = t.as_json()
        if key is not None:
            t.seen[key] = (changes, answer)
        return 200, answer, False

    # -- the server -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the tickets service is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> TicketsService:
        server = ThreadingHTTPServer(("127.0.0.1", self._port), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> TicketsService:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _fields(body: Any) -> dict[str, Any]:
    """The changes a PATCH body asks for; ValueError when it is not a set of known fields."""
    if not isinstance(body, dict) or not body:
        raise ValueError("send a JSON object with status and/or assignee")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise ValueError(f"unknown fields: {', '.join(unknown)}")
    if "status" in body and body["status"] not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}")
    if "assignee" in body and not isinstance(body["assignee"], str | None):
        raise ValueError("assignee must be a string or null")
    return dict(body)


def _apply(t: Ticket, changes: dict[str, Any]) -> None:
    for name, value in changes.items():
        setattr(t, name, value)
    t.version += 1


def _handler_for(svc: TicketsService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: a pooling client reuses its connection

        def log_message(self, format: str, *args: Any) -> None:  # the service keeps its own log
            pass

        def _ticket_id(self) -> str | None:
            m = _PATH.match(self.path)
            ticket_id = unquote(m.group(1)) if m else None
            if ticket_id is None or not _ID.match(ticket_id):
                self._send(404, {"error": f"no route {self.path}"})
                return None
            return ticket_id

        def _body(self) -> Any:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            try:
                return json.loads(raw) if raw else None
            except (json.JSONDecodeError, UnicodeDecodeError):
                return raw.decode("utf-8", "replace")

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if "etag" in body:
                self.send_header("ETag", body["etag"])
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            ticket_id = self._ticket_id()
            if ticket_id is not None:
                self._send(*svc.handle_get(ticket_id))

        def do_PATCH(self) -> None:
            body = self._body()  # read it whatever the answer: the connection stays usable
            ticket_id = self._ticket_id()
            if ticket_id is not None:
                self._send(*svc.handle_patch(
                    ticket_id, body, self.headers.get("If-Match"),
                    self.headers.get("Idempotency-Key"),
                ))

    return Handler


DEFAULT_PORT = 8775  # not plangate ui's 8765: both run side by side in the walkthrough


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="a small tickets service, holding ticket T-1 from the start")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"the port on 127.0.0.1 (default {DEFAULT_PORT}; 0: any free)")
    port = parser.parse_args(argv).port
    try:
        svc = TicketsService(port).start()
    except OSError as e:
        print(f"tickets_service: cannot listen on 127.0.0.1:{port}: {e.strerror or e} "
              "(--port picks another)", file=sys.stderr)
        return 2
    svc.add("T-1", "Printer on fire")
    print(f"export TICKETS_URL={svc.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        svc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
