"""The OpenAI-compatible test model: a local HTTP server with scripted answers, every request
recorded; ``model_backed``, the real re-planner activity on the real OpenAI client against it.

    with FakeOpenAI(responses=[plan_json, 500, "not json"]) as fake:
        client = AsyncOpenAI(base_url=fake.base_url, api_key="sk-test", max_retries=0)
        ...
        fake.requests[0].body["messages"]   # what the client sent
        fake.requests[0].headers["authorization"]

``POST /v1/chat/completions`` answers with the next scripted response, in order:

- ``str``: a ``chat.completion`` whose ``choices[0].message.content`` is that string;
- ``int``: that HTTP status with an OpenAI-style error body;
- ``Reply``: full control (status, content, finish_reason, tool calls, a raw body, a delay);
  ``Reply.calling(name, arguments)`` asks the client to call one of its tools.

A request whose ``tools`` the real API would refuse is answered 400 as the API answers it, and
takes no scripted response: a function name that does not match ``^[a-zA-Z0-9_-]{1,64}$``
(``Invalid 'tools[0].function.name': string does not match pattern...``), or parameters that
are not a JSON schema of type object. With the script used up it answers 500 (``no scripted
response left``). ``GET /v1/models`` lists
the one model. Anything else is 404. The server is stdlib only: a ``ThreadingHTTPServer`` on
127.0.0.1 with a free port, served from a daemon thread.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from plangate.replanner.activity import ReplanActivities
from plangate.replanner.backends.openai import OpenAIBackend
from plangate.world.settings import ModelSettings, Settings

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


# what OpenAI accepts as a function name (and so every provider that copies its API)
FUNCTION_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@dataclass(frozen=True)
class Refusal:
    """Why the real API would answer a request 400, and the field it names."""

    message: str
    param: str


def refused_tools(body: Any) -> Refusal | None:
    """The first tool of a chat/completions request the real API refuses, as it words it."""
    tools = body.get("tools") if isinstance(body, dict) else None
    for i, t in enumerate(tools if isinstance(tools, list) else []):
        fn = t.get("function") if isinstance(t, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
            why = ("string too long. Expected a string with maximum length 64, but got a "
                   f"string with length {len(name)} instead ({name!r})"
                   if isinstance(name, str) and len(name) > 64 else
                   "string does not match pattern. Expected a string that matches the "
                   f"pattern '^[a-zA-Z0-9_-]+$', got {name!r}")
            return Refusal(f"Invalid 'tools[{i}].function.name': {why}.",
                           f"tools[{i}].function.name")
        params = fn.get("parameters", {"type": "object"}) if isinstance(fn, dict) else None
        if not isinstance(params, dict) or params.get("type") != "object":
            got = params.get("type") if isinstance(params, dict) else None
            return Refusal(f"Invalid schema for function '{name}': schema must be a JSON "
                           f"Schema of 'type: \"object\"', got 'type: \"{got}\"'.",
                           f"tools[{i}].function.parameters")
    return None


@dataclass(frozen=True)
class Reply:
    """One scripted answer. ``body`` (any JSON, or ``bytes`` sent as they are) replaces the
    generated body; otherwise a 200 carries ``content`` (and ``tool_calls``: function name and
    arguments, each given the id ``call_fake<N>``) and anything else an error body."""

    status: int = 200
    content: str | None = ""
    finish_reason: str = "stop"
    body: Any = None
    delay_s: float = 0.0
    usage: dict[str, int] = field(
        default_factory=lambda: {"prompt_tokens": 3400, "completion_tokens": 420}
    )
    tool_calls: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def calling(cls, name: str, arguments: Any) -> Reply:
        """The assistant asks for one call of the function ``name``; ``arguments`` (JSON) are
        sent as a JSON string, as the API does."""
        return cls(content=None, finish_reason="tool_calls", tool_calls=((name, arguments),))


Script = str | int | Reply


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # the parsed JSON body, or the raw text when it was not JSON

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []


def _as_reply(item: Script) -> Reply:
    if isinstance(item, Reply):
        return item
    if isinstance(item, bool):  # bool is an int; never meant as a status
        raise TypeError("a scripted response is a str, an int status or a Reply")
    if isinstance(item, int):
        return Reply(status=item)
    return Reply(content=item)


class FakeOpenAI:
    def __init__(self, responses: Iterable[Script] = (), model: str = "fake-model") -> None:
        self.model = model
        self._script = [_as_reply(r) for r in responses]
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.requests: list[Recorded] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- script -------------------------------------------------------------------------------

    def add(self, *responses: Script) -> None:
        with self._lock:
            self._script.extend(_as_reply(r) for r in responses)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    @property
    def completions(self) -> list[Recorded]:
        """The recorded ``POST /v1/chat/completions`` requests."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # -- server -------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
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
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- answers ------------------------------------------------------------------------------

    def _record(self, rec: Recorded, answer: bool) -> Reply | None:
        """Keep the request; with ``answer``, take the next scripted response (None: used up)."""
        with self._lock:
            self.requests.append(rec)
            return self._script.pop(0) if answer and self._script else None

    def _completion(self, reply: Reply) -> dict[str, Any]:
        usage = dict(reply.usage)
        usage["total_tokens"] = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_fake{next(self._ids)}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}
                for name, arguments in reply.tool_calls
            ]
        return {
            "id": f"chatcmpl-fake{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": usage,
        }


def _error(status: int, message: str, param: str | None = None, code: str | None = None
           ) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: Any) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.close_connection = True
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout under test); nothing to tell it

        def _body(self) -> Any:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n).decode("utf-8", "replace") if n else ""
            try:
                return json.loads(raw) if raw else None
            except json.JSONDecodeError:
                return raw

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                model = {"id": fake.model, "object": "model", "created": 0, "owned_by": "fake"}
                self._send(200, {"object": "list", "data": [model]})
            else:
                self._send(404, _error(404, f"no route {self.path}"))

        def do_POST(self) -> None:
            rec = Recorded(
                method="POST",
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=self._body(),
            )
            if not self.path.rstrip("/").endswith("/chat/completions"):
                fake._record(rec, answer=False)
                self._send(404, _error(404, f"no route {self.path}"))
                return
            refusal = refused_tools(rec.body)
            if refusal is not None:  # as the real API: refused before any model runs
                fake._record(rec, answer=False)
                self._send(400, _error(400, refusal.message, refusal.param, "invalid_value"))
                return
            reply = fake._record(rec, answer=True)
            if reply is None:
                self._send(500, _error(500, "no scripted response left"))
                return
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if reply.body is not None:
                self._send(reply.status, reply.body)
            elif reply.status == 200:
                self._send(200, fake._completion(reply))
            else:
                self._send(reply.status, _error(reply.status, f"scripted status {reply.status}"))

    return Handler


def model_backed(settings: Settings, fake: FakeOpenAI) -> ReplanActivities:
    """The real re-planner activity, on the real OpenAI client, against the local fake."""
    model = ModelSettings(
        replanner="openai", name="fake-model", base_url=fake.base_url, api_key="sk-test"
    )
    backend = OpenAIBackend.from_settings(model, settings.catalogue)
    return ReplanActivities(model, settings.catalogue, backend=backend)
