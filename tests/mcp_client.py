"""The MCP client side of the front door's tests: ``plangate mcp`` launched as users launch it
(over stdio by the official client, or as an HTTP server process), the official client on it,
and the Tasks extension as a client declares and drives it (``tasks/get``, ``tasks/update``,
``tasks/cancel``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import httpx2
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import (
    CallToolResult,
    ElicitRequestParams,
    ElicitResult,
    Request,
    RequestParams,
    Result,
)
from pydantic import ConfigDict

from plangate.records.signing import SigningKey

TASKS = "io.modelcontextprotocol/tasks"
REQUEST_ID = "io.plangate/request-id"


def server_env(stack: Any, settings: Any, task_queue: str, **extra: str) -> dict[str, str]:
    return {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": task_queue,
            "PLANGATE_WORKDIR": str(settings.world.workdir), **extra}


def stdio(env: dict[str, str], *args: str, tasks: bool = False) -> Client:
    """The official client, launching ``python -m plangate mcp`` over stdio."""
    return Client(StdioServerParameters(command=sys.executable,
                                        args=["-m", "plangate", "mcp", *args], env=env),
                  read_timeout_seconds=60, extensions=[TasksClient()] if tasks else None,
                  elicitation_callback=url_elicitation if tasks else None)


@dataclass
class HttpServer:
    process: subprocess.Popen[str]
    url: str
    token: str

    def client(self, *, tasks: bool = False, token: str | None = None,
               mode: str = "auto") -> Client:
        headers = {"Authorization": f"Bearer {self.token if token is None else token}"}
        transport = streamable_http_client(
            self.url, http_client=httpx2.AsyncClient(headers=headers, timeout=60))
        return Client(transport, read_timeout_seconds=60, mode=mode,
                      extensions=[TasksClient()] if tasks else None,
                      elicitation_callback=url_elicitation if tasks else None)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


@contextlib.asynccontextmanager
async def http_server(env: dict[str, str], *args: str, tokens: str | None = None
                      ) -> AsyncIterator[HttpServer]:
    """``plangate mcp --http`` on a free loopback port, with a bearer token of its own (one
    client, "token"), or the clients ``tokens`` names (``PLANGATE_MCP_TOKENS``)."""
    token = secrets.token_urlsafe(32)
    access = {"PLANGATE_MCP_TOKEN": token} if tokens is None else \
        {"PLANGATE_MCP_TOKENS": tokens}
    proc = await asyncio.to_thread(
        subprocess.Popen,
        [sys.executable, "-m", "plangate", "mcp", "--http", "--port", "0", *args],
        env={**env, **access}, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
        assert line.startswith("plangate mcp: http://"), line
        yield HttpServer(proc, line.split(": ", 1)[1].strip(), token)
    finally:
        if proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        if proc.poll() is None:
            proc.kill()


async def url_elicitation(context: ClientRequestContext, params: ElicitRequestParams
                          ) -> ElicitResult:
    """Declares elicitation (URL mode among it): a task's input requests are sent only to a
    client that did; the tests answer those requests themselves (``tasks/update``)."""
    return ElicitResult(action="decline")


class TaskCreated(Result):
    """A ``tools/call`` answered with a task (``resultType`` "task")."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str


async def _unresolved(created: TaskCreated, ctx: ClaimContext) -> CallToolResult:
    raise AssertionError("tests drive tasks themselves (allow_claimed=True)")


class TasksClient(ClientExtension):
    """Declares the Tasks extension; the tests read the task shape themselves."""

    identifier = TASKS

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskCreated, resolve=_unresolved)]


class TaskIdParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    task_id: str


class _TaskRequest(Request[TaskIdParams, str]):
    name_param: ClassVar[str | None] = "taskId"


class TaskAnswer(Result):
    model_config = ConfigDict(extra="allow")
    result_type: str = "complete"


@dataclass(frozen=True)
class Caller:
    """One client of a server started with ``PLANGATE_MCP_TOKENS``: its name, bearer token and
    submitter key."""

    name: str
    token: str
    key: SigningKey

    @classmethod
    def new(cls, name: str) -> Caller:
        return cls(name, secrets.token_urlsafe(32), SigningKey.generate(f"{name}-sub"))

    @property
    def entry(self) -> str:
        return f"{self.name}:{self.token}:{self.key.text()}"


def tokens(*callers: Caller) -> str:
    """The ``PLANGATE_MCP_TOKENS`` value naming ``callers``."""
    return ",".join(c.entry for c in callers)


async def task_request(mcp: Client, method: str, task_id: str, **params: Any) -> dict[str, Any]:
    """``tasks/get`` / ``tasks/update`` / ``tasks/cancel`` for ``task_id``; the raw answer."""
    req = _TaskRequest(method=method, params=TaskIdParams(task_id=task_id, **params))
    answer = await mcp.session.send_request(req, TaskAnswer)
    return answer.model_dump(by_alias=True, mode="json", exclude_none=True)


async def call_as_task(mcp: Client, tool: str, args: dict[str, Any], request_id: str
                       ) -> CallToolResult | TaskCreated:
    meta: Any = {REQUEST_ID: request_id}
    result = await mcp.session.call_tool(tool, args, meta=meta,
                                         allow_claimed=True)
    assert isinstance(result, CallToolResult | TaskCreated), result
    return result


async def until_task(mcp: Client, task_id: str, *statuses: str) -> dict[str, Any]:
    for _ in range(400):
        got = await task_request(mcp, "tasks/get", task_id)
        if got["status"] in statuses:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} never reached {statuses}: {got}")
