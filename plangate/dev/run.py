"""``plangate dev``: the embedded stack and a worker in the foreground, until Ctrl-C or SIGTERM.

It prints, on stdout, one ``export NAME=value`` line per variable that points at the stack (and
``PLANGATE_DEMO_SYSTEMS=1``: its worker has the demo systems, unless the environment says ``0``,
so a ``plangate check`` with these exports knows the same tools; ``PLANGATE_TEMPORAL_UI``, so
``plangate ui`` links the Web UI where it is, also on a moved port), a ``# Temporal Web UI: URL``
line, a ``# metrics: http://HOST:PORT/metrics`` line (the worker's Prometheus endpoint:
``PLANGATE_METRICS_ADDRESS`` when set, else 127.0.0.1:9464, or a free port when that one is
taken), and ``plangate: ready`` once the worker is polling its queue. The metrics address is a
comment, not an export: a ``plangate run`` in the shell that pasted the exports serves none.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from plangate.client.connection import connect
from plangate.dev._stack import HOST, choose_port
from plangate.dev.stack import EmbeddedStack, StackError, StateDirInUse, environment
from plangate.records.signing import NAME, SigningKey
from plangate.worker.assembly import build_worker
from plangate.worker.metrics import url
from plangate.world.clients import World
from plangate.world.settings import (
    APPROVER_KEY_VAR,
    APPROVERS_VAR,
    DEMO_SYSTEMS_VAR,
    ENCRYPTION_KEYS_VAR,
    RECEIPT_KEY_VAR,
    TEMPORAL_UI_VAR,
    Settings,
    TemporalSettings,
    parse_encryption_keys,
)

#: The ports ``plangate dev`` asks for; a taken one is replaced by a free one (and printed).
DEV_TEMPORAL_PORT = 7233
DEV_UI_PORT = 8233
DEV_POSTGRES_PORT = 5433
DEV_S3_PORT = 9000
DEV_METRICS_PORT = 9464  # the worker's Prometheus endpoint, unless PLANGATE_METRICS_ADDRESS

#: What a restart keeps, said at start. S3's buckets live in this process's memory: written
#: to the state directory when it stops (SIGINT, SIGTERM, SIGHUP), not when it is killed.
KEPT = ("kept across restarts: Temporal's runs, Postgres's tables, and S3's buckets "
        "(saved when plangate dev stops: Ctrl-C or a closed terminal, not a kill)")


def _key_file(path: Path, name: str) -> SigningKey:
    """The key in ``path``, made there once (only the user can read it)."""
    if path.exists():
        return SigningKey.parse(path.read_text(), str(path))
    key = SigningKey.generate(name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.text() + "\n")
    return key


def local_approver(state_dir: Path) -> dict[str, str]:
    """The quick start's approver: a key of the user running ``plangate dev``, made once in
    its state directory (only the user can read it). Its worker lists the public key; the
    shells that take the exports sign answers with the file. Variables already set win."""
    path = state_dir / "approver.key"
    key = _key_file(path, _user())
    return {
        APPROVERS_VAR: os.environ.get(APPROVERS_VAR) or key.public_entry(),
        APPROVER_KEY_VAR: os.environ.get(APPROVER_KEY_VAR) or str(path.resolve()),
    }


def local_receipt_key(state_dir: Path) -> dict[str, str]:
    """The dev worker's receipt key (``plangate.records.receipts``), made once in its state
    directory: its public line is ``plangate key show`` of the file. A variable already set
    wins."""
    path = state_dir / "receipt.key"
    if not os.environ.get(RECEIPT_KEY_VAR):
        _key_file(path, "plangate-dev-worker")
    return {RECEIPT_KEY_VAR: os.environ.get(RECEIPT_KEY_VAR) or str(path.resolve())}


def _user() -> str:
    import getpass

    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = ""
    return name if NAME.match(name) else "local"


async def run_dev(
    state_dir: str | os.PathLike[str] | None = None,
    *,
    ui: bool = True,
    temporal_port: int | None = DEV_TEMPORAL_PORT,
    ui_port: int | None = DEV_UI_PORT,
    postgres_port: int | None = DEV_POSTGRES_PORT,
    s3_port: int | None = DEV_S3_PORT,
    metrics_port: int | None = DEV_METRICS_PORT,
    port_fallback: bool = True,
    stop: asyncio.Event | None = None,
    out: TextIO | None = None,
) -> int:
    """Run the stack and a worker until SIGINT/SIGTERM/SIGHUP (or until ``stop`` is set).

    ``state_dir`` defaults to ``.plangate/dev`` under the current directory; Temporal's and
    Postgres's state persist there between runs, and S3's buckets, saved there when it stops.
    Ports given as None are picked free. Returns the exit code: 0 after a clean stop, 1 if the
    stack could not start, 2 if another process runs a stack on ``state_dir`` (one line names
    it).
    While the worker runs, ``os.environ`` holds the stack's variables; afterwards each is as it
    was before.
    """
    out = out or sys.stdout
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    handled: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: its terminal closed
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue  # under nohup: outlive the terminal, as asked
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, _on_signal, loop, stop, handled)
            handled.append(sig)

    stack = EmbeddedStack(
        state_dir,
        ui=ui,
        temporal_port=temporal_port,
        ui_port=ui_port,
        postgres_port=postgres_port,
        s3_port=s3_port,
        port_fallback=port_fallback,
        keep_s3=True,
    )
    try:
        try:
            await stack.start()
        except StateDirInUse as e:
            print(f"plangate dev: {e}", file=sys.stderr)
            return 2
        except StackError as e:
            print(f"plangate dev: {e}", file=sys.stderr)
            return 1
        env = stack.env()
        env[DEMO_SYSTEMS_VAR] = os.environ.get(DEMO_SYSTEMS_VAR) or "1"
        env.update(local_approver(Path(stack.state_dir)))
        env.update(local_receipt_key(Path(stack.state_dir)))
        if stack.ui_url:  # where it is, for the approval page's links (8233, unless moved)
            env[TEMPORAL_UI_VAR] = stack.ui_url
        for name, value in env.items():
            print(f"export {name}={shlex.quote(value)}", file=out)
        if stack.ui_url:
            print(f"# Temporal Web UI: {stack.ui_url}", file=out)
        keys = parse_encryption_keys(os.environ.get(ENCRYPTION_KEYS_VAR) or "")
        if keys:  # never printed: the other shells need the same variable
            origin = f" --origin {stack.ui_url}" if stack.ui_url else ""
            print(f"# payloads encrypted with key {keys[0][0]}: set the same "
                  f"{ENCRYPTION_KEYS_VAR} where plangate runs; the Web UI reads them "
                  f"through `plangate codec-server{origin}`", file=out)
        print(f"# state: {stack.state_dir}  (Ctrl-C stops everything)", file=out)
        print(f"# {KEPT}", file=out)
        if stack.s3_restored:
            print(f"# {stack.s3_restored}", file=out)
        out.flush()
        if stop.is_set():
            return 0
        # the dev stack is the top of the house: it sets os.environ for this process's boto3
        # (the S3 credentials) and reads its settings from there, once
        with environment(env):
            settings = Settings.from_env(os.environ)
            # said before anything runs: unset, a money or external step waits for a card
            print(f"# {settings.policy.approval_rule()}", file=out, flush=True)
            obs = settings.observability
            if obs.metrics_address is None:
                port = choose_port("metrics", metrics_port, fallback=port_fallback)
                obs = replace(obs, metrics_address=f"{HOST}:{port}")
                settings = replace(settings, observability=obs)
            await _serve(settings, stop, out)
        return 0
    finally:
        await stack.stop()
        for sig in handled:
            loop.remove_signal_handler(sig)


async def _serve(settings: Settings, stop: asyncio.Event, out: TextIO) -> None:
    """plangate's worker (the one assembly) on the stack until ``stop``; ``plangate: ready``
    once it polls its task queue."""
    client = await connect(settings, serve_metrics=True)
    metrics_address = settings.observability.metrics_address
    if metrics_address:
        print(f"# metrics: {url(metrics_address)}", file=out, flush=True)
    world = World(settings.world)
    try:
        async with await build_worker(client, settings, world) as worker:
            identity = worker.config().get("identity") or client.identity
            queue = worker.config()["task_queue"]  # its catalogue's (records.placement)
            await _wait_until_polling(client, settings.temporal, queue, identity, stop)
            if not stop.is_set():
                print("plangate: ready", file=out, flush=True)
            await stop.wait()
    finally:
        await world.close()


def _on_signal(
    loop: asyncio.AbstractEventLoop, stop: asyncio.Event, handled: list[signal.Signals]
) -> None:
    """First Ctrl-C: stop cleanly. After that, a second Ctrl-C interrupts the clean stop."""
    stop.set()
    for sig in handled:
        loop.remove_signal_handler(sig)
    handled.clear()


async def _wait_until_polling(
    client: Client, temporal: TemporalSettings, queue: str, identity: str,
    stop: asyncio.Event, wait_s: float = 30.0,
) -> None:
    """Until the server lists a poller with the worker's identity on its task queue."""
    deadline = time.monotonic() + wait_s
    while not stop.is_set():
        for kind in (
            TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        ):
            resp = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=temporal.namespace,
                    task_queue=TaskQueue(name=queue),
                    task_queue_type=kind,
                )
            )
            if any(p.identity == identity for p in resp.pollers):
                return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the worker did not poll task queue {queue!r} within {wait_s:.0f}s"
            )
        await asyncio.sleep(0.1)
