"""The fixtures reach real services: S3 over HTTP, Postgres over TCP, Temporal over gRPC."""

from __future__ import annotations

import os
import uuid
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import botocore.exceptions
import psycopg
import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from plangate.stack import EmbeddedStack, StackError
from world.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def test_env_points_at_the_stack(stack: EmbeddedStack, settings: Settings) -> None:
    env = stack.env()
    assert env["TEMPORAL_ADDRESS"] == stack.temporal_address == settings.temporal_address
    assert env["PLANGATE_DATABASE_URL"] == settings.database_url
    assert env["PLANGATE_S3_ENDPOINT_URL"] == settings.s3_endpoint_url
    assert settings.workdir == stack.workdir and stack.workdir.is_dir()
    assert os.environ["AWS_ACCESS_KEY_ID"] == env["AWS_ACCESS_KEY_ID"]
    assert stack.ui_url is None  # headless in tests


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


async def test_temporal_dev_server_answers(client: Client, settings: Settings) -> None:
    assert client.namespace == settings.temporal_namespace == "default"
    count = await client.count_workflows()
    assert count.count >= 0


async def test_time_skipping_env_jumps_the_clock(time_skipping_env: WorkflowEnvironment) -> None:
    assert time_skipping_env.supports_time_skipping
    before = await time_skipping_env.get_current_time()
    await time_skipping_env.sleep(timedelta(hours=1))
    after = await time_skipping_env.get_current_time()
    assert after - before >= timedelta(hours=1)


async def test_a_taken_fixed_port_is_a_clear_error_or_a_fallback(
    stack: EmbeddedStack, tmp_path: Path
) -> None:
    taken = int(stack.s3_endpoint_url.rsplit(":", 1)[1])
    strict = EmbeddedStack(tmp_path, temporal=False, s3_port=taken)
    with pytest.raises(StackError, match=r"S3 server.*in use"):
        await strict.start()  # Postgres started first, and is stopped again
    async with EmbeddedStack(tmp_path, temporal=False, s3_port=taken, port_fallback=True) as other:
        assert other.temporal_address is None and "TEMPORAL_ADDRESS" not in other.env()
        assert other.s3_endpoint_url != stack.s3_endpoint_url
        conn = await psycopg.AsyncConnection.connect(other.database_url)
        await conn.close()
