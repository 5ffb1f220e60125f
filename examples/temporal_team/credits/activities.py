"""The team's activities: a credit to a customer's account (money), its reader by key, an
export load that answers ok (and, in ``broken`` mode, writes nothing), and an archive copy."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from typing import TYPE_CHECKING

import boto3
import psycopg
from pydantic import BaseModel
from temporalio import activity

from plangate.temporal import call_key, guarded

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

#: The team's own world, read from the environment: its Postgres and its S3 endpoint (under
#: ``plangate dev``, the stack's: ``$PLANGATE_DATABASE_URL``, ``$PLANGATE_S3_ENDPOINT_URL``).
WORLD_VARS = {"TEAM_DATABASE_URL": "the team's own Postgres (a libpq URL)",
              "TEAM_S3_ENDPOINT_URL": "the team's S3 endpoint (an http(s) URL)"}
CALLS: Counter[str] = Counter()  # how often each activity's body ran, in this process
BROKEN_EXPORT = {"on": False}  # the export answers ok and writes nothing


class CreditRequest(BaseModel):
    account_id: str
    amount_cents: int
    reason: str = ""


class Credit(BaseModel):
    credit_id: str
    account_id: str
    amount_cents: int


class ExportRequest(BaseModel):
    bucket: str
    key: str
    rows: int


def _dsn() -> str:
    return os.environ["TEAM_DATABASE_URL"]


def _s3() -> S3Client:
    return boto3.client("s3", endpoint_url=os.environ["TEAM_S3_ENDPOINT_URL"])


async def ensure_schema() -> None:
    async with await psycopg.AsyncConnection.connect(_dsn(), autocommit=True) as conn:
        await conn.execute("CREATE SCHEMA IF NOT EXISTS team")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS team.credits (credit_id text PRIMARY KEY, "
            "call_key text, account_id text NOT NULL, amount_cents bigint NOT NULL)")


@activity.defn
@guarded  # money: runs only for a call plangate's guard admitted, never on a worker without it
async def issue_credit(req: CreditRequest) -> Credit:
    """Credit the account. Two calls make two credits: nothing here dedupes."""
    CALLS["issue_credit"] += 1
    credit = Credit(credit_id=uuid.uuid4().hex, account_id=req.account_id,
                    amount_cents=req.amount_cents)
    async with await psycopg.AsyncConnection.connect(_dsn(), autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO team.credits (credit_id, call_key, account_id, amount_cents) "
            "VALUES (%s, %s, %s, %s)",
            (credit.credit_id, call_key(), credit.account_id, credit.amount_cents))
    await asyncio.sleep(float(os.environ.get("TEAM_CREDIT_PAUSE_S", "0")))
    return credit


@activity.defn
async def find_credit(key: str) -> Credit | None:
    """The credit a call made, by the call's key (None: there is none)."""
    async with await psycopg.AsyncConnection.connect(_dsn(), autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT credit_id, account_id, amount_cents FROM team.credits WHERE call_key = %s",
            (key,))
        row = await cur.fetchone()
    if row is None:
        return None
    return Credit(credit_id=row[0], account_id=row[1], amount_cents=row[2])


@activity.defn
async def load_export(req: ExportRequest) -> str:
    """Write the export's object; answers ok."""
    CALLS["load_export"] += 1
    if not BROKEN_EXPORT["on"]:
        body = "\n".join(f"row {i}" for i in range(req.rows)).encode()
        await asyncio.to_thread(_s3().put_object, Bucket=req.bucket, Key=req.key, Body=body)
    return "ok"


@activity.defn
async def archive_object(bucket: str, key: str) -> str:
    """Copy the object under archive/."""
    CALLS["archive_object"] += 1
    await asyncio.to_thread(_s3().copy_object, Bucket=bucket, Key=f"archive/{key}",
                            CopySource={"Bucket": bucket, "Key": key})
    return f"archive/{key}"


@activity.defn
async def count_rows(n: int) -> int:
    """Unguarded: no entry in the guard table."""
    CALLS["count_rows"] += 1
    return n
