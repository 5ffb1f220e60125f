"""Sessions to MCP servers, one per server and worker: opened on first use in the worker's event
loop (behind a lock), dropped when the server stops answering (a dead stdio process, an HTTP
error, a timeout) so that the next call connects again, and closed with the worker's ``World``.

A server that does not answer raises ``ServerDown``, a ``ConnectionError``: plangate's outage
path (``world.outages``) makes the step wait for it, then halt; it never passes. An answer that
is an error of the protocol (an unknown tool, arguments the server refuses) is ``ServerRefused``.

The ``mcp`` SDK (``plangate[mcp]``) is imported here only when a session is made: checking a
plan that names a server's tools connects to nothing and loads none of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import RequestParamsMeta

    from plangate.world.clients import World

log = logging.getLogger(__name__)
# how long a session may take to close (a stdio server gets 2 s, then SIGTERM, then SIGKILL)
CLOSE_TIMEOUT_S = 8.0


@dataclass(frozen=True)
class ServerAddress:
    """How to reach one server: ``command`` (stdio) or ``url`` (streamable HTTP)."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 30.0

    @property
    def where(self) -> str:
        return self.url or " ".join(self.command)


@dataclass(frozen=True)
class ToolAnswer:
    """A tool call's answer: ``is_error`` (the tool failed), its text content joined, and its
    structured content when the server sent one."""

    is_error: bool
    text: str
    structured: dict[str, Any] | None


@dataclass(frozen=True)
class ListedTool:
    name: str
    read_only: bool | None  # the server's readOnlyHint; None: it says nothing


# where a guarded call's idempotency key travels to an MCP server (``_meta``)
IDEMPOTENCY_META = "io.plangate/idempotency-key"


class ServerDown(ConnectionError):
    """The MCP server did not start, did not answer, or went away."""


class ServerRefused(Exception):
    """The MCP server answered with a protocol error (``code``, its message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"error {code}: {message}")
        self.code = code


class McpSessions:
    """Every server of one MCP servers file, on one worker (``World.client`` keeps it)."""

    def __init__(self, servers: Mapping[str, ServerAddress]) -> None:
        self._links = {name: _Link(address) for name, address in servers.items()}

    async def call(
        self, server: str, tool: str, args: Mapping[str, Any], idempotency_key: str | None = None
    ) -> ToolAnswer:
        """``idempotency_key``: sent in the request's ``_meta`` (``IDEMPOTENCY_META``), for a
        server that can dedupe; plangate's own ledger never counts on it."""
        link = self._links[server]
        client = await link.client()
        # RequestParamsMeta is a TypedDict open to other keys on the wire (``_meta``)
        meta = (cast("RequestParamsMeta", {IDEMPOTENCY_META: idempotency_key})
                if idempotency_key is not None else None)
        try:
            result = await client.call_tool(
                tool, dict(args), read_timeout_seconds=link.address.timeout_s, meta=meta
            )
        except Exception as e:
            raise await link.failed(client, e) from e
        from mcp_types import TextContent

        text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
        return ToolAnswer(bool(result.is_error), text, result.structured_content)

    async def list_tools(self, server: str) -> dict[str, ListedTool]:
        link = self._links[server]
        client = await link.client()
        try:
            listed = await client.list_tools()
        except Exception as e:
            raise await link.failed(client, e) from e
        return {
            t.name: ListedTool(t.name, t.annotations.read_only_hint if t.annotations else None)
            for t in listed.tools
        }

    async def aclose(self) -> None:
        for link in self._links.values():
            await link.close()


class _Link:
    """One server's session. Its transport's task group must be entered and left by one task,
    so a task of its own holds the session open (``_hold``) until it is dropped or closed;
    calls from any activity share it."""

    def __init__(self, address: ServerAddress) -> None:
        self.address = address
        self._lock: asyncio.Lock | None = None
        self._client: Client | None = None
        self._stop = asyncio.Event()
        self._holder: asyncio.Task[None] | None = None

    @property
    def lock(self) -> asyncio.Lock:
        if self._lock is None:  # made in the worker's loop, on first use
            self._lock = asyncio.Lock()
        return self._lock

    async def client(self) -> Client:
        async with self.lock:
            if self._client is not None and self._holder is not None and not self._holder.done():
                return self._client
            await self._drop()
            self._client = await self._open()
            return self._client

    async def failed(self, client: Client, e: Exception) -> Exception:
        """What a call's ``e`` means: a protocol answer, or the server gone (the session is
        dropped: the next call connects again)."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        if isinstance(e, MCPError) and e.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
            return ServerRefused(e.code, e.message)
        async with self.lock:
            if self._client is client:
                await self._drop()
        why = "timed out" if isinstance(e, MCPError) and e.code == REQUEST_TIMEOUT else _why(e)
        return ServerDown(f"MCP server {self.address.name} ({self.address.where}): {why}")

    async def close(self) -> None:
        async with self.lock:
            await self._drop()

    async def _open(self) -> Client:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        holder = asyncio.create_task(self._hold(ready, self._stop))
        try:
            async with asyncio.timeout(self.address.timeout_s):
                client = await asyncio.shield(ready)
        except BaseException as e:
            self._stop.set()
            holder.cancel()
            with contextlib.suppress(BaseException):
                await holder
            if isinstance(e, asyncio.CancelledError):
                raise
            raise ServerDown(
                f"MCP server {self.address.name} ({self.address.where}) did not start or "
                f"answer: {_why(e)}"
            ) from e
        self._holder = holder
        return client

    async def _hold(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        try:
            async with _connect(self.address) as client:
                ready.set_result(client)
                await stop.wait()
        except BaseException as e:  # ends the session; a caller sees it at its next call
            if not ready.done():
                ready.set_exception(ServerDown(_why(e)))
            if isinstance(e, asyncio.CancelledError):
                raise
            log.info("MCP server %s: session ended: %s", self.address.name, _why(e))

    async def _drop(self) -> None:
        holder, self._holder, self._client = self._holder, None, None
        if holder is None:
            return
        self._stop.set()
        try:  # shielded: a cancelled caller leaves the session closing, not half closed
            await asyncio.wait_for(asyncio.shield(holder), CLOSE_TIMEOUT_S)
        except TimeoutError:
            holder.cancel()
        except Exception:
            log.exception("MCP server %s: closing its session failed", self.address.name)


def _connect(address: ServerAddress) -> Client:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    if address.url is not None:
        return Client(address.url, read_timeout_seconds=address.timeout_s, cache=None)
    program, *args = address.command
    params = StdioServerParameters(command=program, args=args, env=dict(address.env) or None)
    return Client(params, read_timeout_seconds=address.timeout_s, cache=None)


def _why(e: BaseException) -> str:
    """One line for ``e``: the first leaf of an exception group."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}"[:300]


@dataclass(frozen=True)
class McpServers:
    """The servers of one file; ``on(world)``: their sessions on that worker's world."""

    key: str
    addresses: Mapping[str, ServerAddress]

    def on(self, world: World) -> McpSessions:
        return world.client(f"mcp:{self.key}", lambda: McpSessions(self.addresses))
