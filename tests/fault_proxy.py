"""A TCP proxy on 127.0.0.1 that partitions a worker from one system (issue 24).

The worker is given the proxy's address instead of the system's; the test (or the bench) that
owns the proxy decides what the network does:

- ``passing()``: bytes flow both ways (the default);
- ``hold()``: a partition in which nothing arrives. Requests already sent may have landed (the
  system acts on them), their answers never come back; new connections are accepted and hang. The
  bytes read meanwhile are kept, and ``heal()`` delivers them in order, then any close that came
  while the partition held (a server that ended the session learns nothing to the client until
  the network heals);
- ``reset()``: every connection is torn down with a RST, and new ones are reset at once, until
  ``heal()``.

Nothing here is mocked: both ends are real sockets, the system behind is the real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from dataclasses import dataclass, field


@dataclass(eq=False)  # kept in a set: by identity
class _Link:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close with a RST, not a FIN: the peer's next read or write fails at once."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self._open = asyncio.Event()
        self._open.set()
        self._resetting = False
        self._links: set[_Link] = set()
        self._server: asyncio.Server | None = None
        self.port = 0
        self.connections = 0  # accepted, in all
        self.resets = 0  # connections torn down by reset()

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self._open.set()
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            _abort(link.client)
            _abort(link.server)
            for t in link.tasks:
                t.cancel()
        self._links.clear()

    async def __aenter__(self) -> FaultProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- what the network does ------------------------------------------------------------------
    def hold(self) -> None:
        self._open.clear()

    def reset(self) -> int:
        """Tear every connection down (RST) and refuse new ones until ``heal``; how many."""
        self._resetting = True
        n = 0
        for link in list(self._links):
            _abort(link.client)
            _abort(link.server)
            n += 1
        self.resets += n
        return n

    def heal(self) -> None:
        self._resetting = False
        self._open.set()

    @property
    def held(self) -> bool:
        return not self._open.is_set()

    # -- the links ------------------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self._resetting:
            _abort(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            _abort(writer)
            return
        link = _Link(writer, up_writer)
        self._links.add(link)
        link.tasks = [
            asyncio.create_task(self._pump(reader, up_writer)),
            asyncio.create_task(self._pump(up_reader, writer)),
        ]
        try:
            await asyncio.gather(*link.tasks, return_exceptions=True)
        finally:
            self._links.discard(link)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                await self._open.wait()  # held: kept until the network heals
                dst.write(data)
                await dst.drain()
            await self._open.wait()  # a close during a partition reaches the peer at heal
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                dst.close()
