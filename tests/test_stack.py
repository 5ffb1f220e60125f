"""The fixtures reach real services: S3 over HTTP, Postgres over TCP, Temporal over gRPC."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import botocore.exceptions
import psycopg
import pytest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

import plangate.dev._stack
from plangate.dev._stack import HOST
from plangate.dev.stack import EmbeddedStack, StackError
from plangate.testing import s3_client, stack_state

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


async def test_env_points_at_the_stack(stack: EmbeddedStack) -> None:
    """Each address of ``env()`` reaches the service it names (not merely a string that equals
    another string built from it)."""
    env = stack.env()
    client = await Client.connect(env["TEMPORAL_ADDRESS"], namespace=env["TEMPORAL_NAMESPACE"])
    ns = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=env["TEMPORAL_NAMESPACE"])
    )
    assert ns.namespace_info.name == "default"
    port = port_of(env["PLANGATE_DATABASE_URL"])
    async with await psycopg.AsyncConnection.connect(env["PLANGATE_DATABASE_URL"]) as conn:
        cur = await conn.execute("SELECT inet_server_port()")
        assert await cur.fetchone() == (port,)
    s3 = s3_client(env)
    bucket = _name("env")
    s3.create_bucket(Bucket=bucket)
    assert bucket in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    s3.close()
    assert await asyncio.to_thread(Path(env["PLANGATE_WORKDIR"]).is_dir)


def test_s3_put_and_head_over_http(s3: S3Client) -> None:
    bucket = _name("bucket")
    s3.create_bucket(Bucket=bucket)
    put = s3.put_object(Bucket=bucket, Key="a/b.txt", Body=b"hello")
    head = s3.head_object(Bucket=bucket, Key="a/b.txt")
    assert head["ContentLength"] == 5
    assert head["ETag"] == put["ETag"]
    assert s3.get_object(Bucket=bucket, Key="a/b.txt")["Body"].read() == b"hello"


def test_s3_conditional_writes_answer_412(s3: S3Client) -> None:
    bucket = _name("bucket")
    s3.create_bucket(Bucket=bucket)
    put = s3.put_object(Bucket=bucket, Key="k", Body=b"v1")
    for condition in ({"IfNoneMatch": "*"}, {"IfMatch": '"0123456789abcdef0123456789abcdef"'}):
        with pytest.raises(botocore.exceptions.ClientError) as err:
            s3.put_object(Bucket=bucket, Key="k", Body=b"v2", **condition)  # type: ignore[arg-type]
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    s3.put_object(Bucket=bucket, Key="k", Body=b"v2", IfMatch=put["ETag"])
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v2"


async def test_postgres_create_and_select(pg: psycopg.AsyncConnection[tuple[Any, ...]]) -> None:
    table = _name("t").replace("-", "_")
    await pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, note text)")
    await pg.execute(f"INSERT INTO {table} VALUES (1, 'one'), (2, 'two')")
    cur = await pg.execute(f"SELECT note FROM {table} ORDER BY id")
    assert await cur.fetchall() == [("one",), ("two",)]
    cur = await pg.execute("SHOW server_version_num")
    row = await cur.fetchone()
    assert row is not None and int(row[0]) >= 150000


async def test_temporal_dev_server_keeps_a_workflow(client: Client) -> None:
    # No worker polls this queue: the server alone records the start and the termination.
    workflow_id = _name("stack-smoke")
    handle = await client.start_workflow(
        "NobodyRunsThis", id=workflow_id, task_queue=_name("no-worker")
    )
    running = await handle.describe()
    assert (running.id, running.status) == (workflow_id, WorkflowExecutionStatus.RUNNING)
    await handle.terminate("test over")
    ended = await handle.describe()
    assert ended.status == WorkflowExecutionStatus.TERMINATED


async def test_time_skipping_env_jumps_the_clock(time_skipping_env: WorkflowEnvironment) -> None:
    # an hour of sleep that returns at all (the test has a 240 s timeout) was skipped
    before = await time_skipping_env.get_current_time()
    await time_skipping_env.sleep(timedelta(hours=1))
    after = await time_skipping_env.get_current_time()
    assert after - before >= timedelta(hours=1)


@pytest.fixture(scope="module")
def pg_state() -> Iterator[Path]:
    """One state directory for the stacks below: Postgres's initdb runs once for them all."""
    with stack_state("ports") as path:
        yield path


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port some other program listens on for the duration of a test."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        s.listen()
        yield int(s.getsockname()[1])


async def test_a_taken_fixed_port_is_a_clear_error_or_a_fallback(
    stack: EmbeddedStack, pg_state: Path
) -> None:
    taken = int(stack.s3_endpoint_url.rsplit(":", 1)[1])
    strict = EmbeddedStack(pg_state, temporal=False, s3_port=taken)
    with pytest.raises(StackError, match=r"S3 server.*in use"):
        await strict.start()  # Postgres started first, and is stopped again
    async with EmbeddedStack(pg_state, temporal=False, s3_port=taken, port_fallback=True) as other:
        assert other.temporal_address is None and "TEMPORAL_ADDRESS" not in other.env()
        assert other.s3_endpoint_url != stack.s3_endpoint_url
        conn = await psycopg.AsyncConnection.connect(other.database_url)
        await conn.close()


async def test_a_port_taken_between_check_and_bind_is_replaced(
    pg_state: Path, held_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race of check-then-bind, made certain: the port chosen for Postgres is one another
    program already listens on, and the fixed S3 port passes its check but is taken when the
    server binds it. Both servers start on other ports and answer there."""
    real_free_port = plangate.dev._stack.free_port
    picks: list[int] = []

    def first_pick_is_taken(host: str = HOST) -> int:
        picks.append(held_port if not picks else real_free_port(host))
        return picks[-1]

    monkeypatch.setattr(plangate.dev._stack, "free_port", first_pick_is_taken)
    monkeypatch.setattr(plangate.dev._stack, "port_is_free", lambda port, host=HOST: True)
    async with EmbeddedStack(
        pg_state, temporal=False, s3_port=held_port, port_fallback=True
    ) as moved:
        assert picks[0] == held_port and len(picks) == 2  # Postgres: taken, then another
        pg_port, s3_port = port_of(moved.database_url), port_of(moved.s3_endpoint_url)
        assert held_port not in (pg_port, s3_port)
        async with await psycopg.AsyncConnection.connect(moved.database_url) as conn:
            cur = await conn.execute("SELECT inet_server_port()")
            assert await cur.fetchone() == (pg_port,)
        s3 = s3_client(moved.env())
        bucket = _name("moved")
        s3.create_bucket(Bucket=bucket)
        assert s3.head_bucket(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"] == 200
        s3.close()


async def test_a_port_that_stays_taken_fails_after_bounded_attempts(
    pg_state: Path, held_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    picks: list[int] = []

    def always_taken(host: str = HOST) -> int:
        picks.append(held_port)
        return held_port

    monkeypatch.setattr(plangate.dev._stack, "free_port", always_taken)
    with pytest.raises(StackError, match=rf"Postgres failed to start: .*port {held_port}.*in use"):
        await EmbeddedStack(pg_state, temporal=False).start()
    assert len(picks) == 3  # bounded: three ports tried, then the error
    # a fixed port without fallback is never silently moved, even when its check passed
    picks.clear()
    monkeypatch.setattr(plangate.dev._stack, "port_is_free", lambda port, host=HOST: True)
    with pytest.raises(StackError, match=rf"Postgres: port {held_port} .* in use"):
        await EmbeddedStack(pg_state, temporal=False, postgres_port=held_port).start()
    assert picks == []
