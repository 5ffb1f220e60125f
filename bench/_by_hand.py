"""A guarded step's reads and rows written by hand (issue 50): the activities of
``bench._bare_workflow.ByHandChain`` and ``bench._team_workflow.StampByHandWorkflow``, doing
with psycopg and boto3 directly what plangate's guarded call does for the same write
(``plangate.activities.guarded_call.run_guarded`` with ``plangate.world.ledger``), statement
for statement, the two pairs plangate makes at once made at once here too:

- the pre read: for a plan step, ``column_exists``'s query (``plangate.probes._postgres``: a
  count of the column in ``information_schema.columns``); for a team's call,
  ``object_exists``'s HEAD of the source object (its size above 0). At the same time,
- the intent row: ``INSERT ... ON CONFLICT (idempotency_key) DO NOTHING RETURNING 1``
  (``ledger.begin``) into ``LEDGER``, a table of the bench's own shaped as
  ``plangate.effects`` (``LIKE ... INCLUDING ALL``: the same columns, defaults and indexes,
  so a row costs what plangate's costs). A key already there is read back (``ledger._LOCKED``
  stands for it): done, the write is not made again; else it goes ahead under the same key.
  A pre read that does not hold: the row ``failed`` (plangate's refusal settles it so), and a
  non-retryable error;
- the write: for a plan step, ``set_job_state``'s upsert in a transaction that, last, marks the
  row done (``ledger.in_effect``: the effect and its outcome one commit); for a team's call,
  its ``put_object`` (no Postgres transaction to mark);
- the outcome row: ``UPDATE ... SET state = 'done', output = ...`` (``ledger.settle``). At the
  same time,
- the post read: ``job_state``'s query (``plangate.probes._postgres.JOB_STATE``), answered to
  the workflow, which judges it; for a team's call, ``object_exists``'s HEAD of the object
  written (judged here: the team's workflow takes no answer).

Each Postgres statement on a pooled connection in autocommit, as plangate's reads and ledger
rows are (``world.pg.reading``: one round trip, not three); the write in its transaction as
``world.pg.tool_transaction`` runs it. What plangate does around these (the proofs, the
policies, the records and reports) is what a team writing this by hand does not.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from botocore.exceptions import ClientError
from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.exceptions import ApplicationError

from bench._bare_workflow import GUARDED_SET_JOB, GuardedWrite
from bench._team_workflow import STAMP_BY_HAND, Stamp
from plangate.activities.tools._statements import SET_JOB
from plangate.probes._postgres import JOB_STATE

LEDGER = "bench_ledger"  # the team's own ledger table (``create_ledger``)
COLUMN = ("SELECT count(*) FROM information_schema.columns "
          "WHERE table_schema = %s AND table_name = %s AND column_name = %s")
INTENT = f"""
INSERT INTO {LEDGER} (idempotency_key, run_id, step, plan_version, tool, args_sha256, effect,
    resource, state)
VALUES (%s, %s, %s, 1, %s, %s, 'write', %s, 'intent')
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING 1
"""
PRIOR = f"SELECT state FROM {LEDGER} WHERE idempotency_key = %s FOR UPDATE"
DONE_IN_WRITE = (f"UPDATE {LEDGER} SET state = 'done', outcome_at = now() "
                 "WHERE idempotency_key = %s AND state = 'intent'")
OUTCOME = f"""
UPDATE {LEDGER} SET state = %s, output = coalesce(%s, output), detail = %s,
    outcome_at = coalesce(outcome_at, now())
WHERE idempotency_key = %s
"""


async def create_ledger(conn: psycopg.AsyncConnection[Any]) -> None:
    """The bench's own ledger table, shaped as plangate's (the worker created that one)."""
    await conn.execute(f"CREATE TABLE IF NOT EXISTS {LEDGER} "
                       "(LIKE plangate.effects INCLUDING ALL)")


async def all_done(database_url: str) -> int:
    """The ledger's rows, every one ``done`` (else the bench stops: the by-hand kind did not
    do what it stands for)."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute(f"SELECT count(*), count(*) FILTER (WHERE state = 'done' AND "
                                 f"output IS NOT NULL) FROM {LEDGER}")
        rows, done = await cur.fetchone() or (0, 0)
    if rows == 0 or done != rows:
        raise SystemExit(f"{LEDGER}: {done} of {rows} rows done with their output")
    return int(rows)


def args_sha256(args: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(args, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


class Ledger:
    """The team's ledger rows and reads, each statement on a pooled connection in autocommit."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self.pool = pool

    @asynccontextmanager
    async def autocommit(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with self.pool.connection() as conn:
            await conn.set_autocommit(True)
            try:
                yield conn
            finally:
                await conn.set_autocommit(False)

    async def one(self, query: str, params: tuple[Any, ...]) -> Any:
        async with self.autocommit() as conn:
            row = await (await conn.execute(query, params)).fetchone()
            return None if row is None else row[0]

    async def intent(self, key: str, run_id: str, step: int, tool: str, args: dict[str, str],
                     resource: str) -> bool:
        """True: the row is new. False: the key was there; True again if its try did not
        finish (the call goes ahead under it), False if it is done (not made again)."""
        fresh = await self.one(INTENT, (key, run_id, step, tool, args_sha256(args), resource))
        if fresh is not None:
            return True
        return bool(await self.one(PRIOR, (key,)) != "done")

    async def outcome(self, key: str, state: str, output: dict[str, Any] | None,
                      detail: str = "") -> None:
        data = None if output is None else Jsonb(output)
        async with self.autocommit() as conn:
            await conn.execute(OUTCOME, (state, data, detail, key))

    async def refuse(self, key: str, why: str) -> None:
        await self.outcome(key, "failed", None, why)
        raise ApplicationError(why, type="precondition_unmet", non_retryable=True)


class JobsByHand(Ledger):
    """``ByHandChain``'s activity."""

    async def write(self, w: GuardedWrite) -> int:
        query = sql.SQL(SET_JOB).format(sql.Literal(w.job_id), sql.Literal(w.state),
                                        sql.Literal(w.owner))
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(query)
            await conn.execute(DONE_IN_WRITE, (w.key,))
            return int(cur.rowcount)

    @activity.defn(name=GUARDED_SET_JOB)
    async def set_job(self, w: GuardedWrite) -> str:
        """The job's state as read after the write ('' where there is none)."""
        schema, _, table = w.table.rpartition(".")
        column, fresh = await asyncio.gather(
            self.one(COLUMN, (schema or "public", table, w.column)),
            self.intent(w.key, w.owner, w.step, "warehouse.run_sql",
                        {"job_id": w.job_id, "state": w.state}, "table:plangate.jobs"))
        if fresh:
            if int(column) != 1:
                await self.refuse(w.key, f"{w.table}.{w.column} does not exist")
            output = {"rowcount": await self.write(w)}
            after, _ = await asyncio.gather(self.one(JOB_STATE, (w.job_id, w.owner)),
                                            self.outcome(w.key, "done", output))
        else:
            after = await self.one(JOB_STATE, (w.job_id, w.owner))
        return str(after or "")


class StampsByHand(Ledger):
    """``StampByHandWorkflow``'s activity; the key is the team's own: the workflow's id and the
    activity's (a retry has the same)."""

    def __init__(self, pool: AsyncConnectionPool[Any], s3: Any) -> None:
        super().__init__(pool)
        self.s3 = s3

    async def size(self, bucket: str, key: str) -> int:
        """The object's size by its HEAD; -1: there is none."""
        try:
            head = await asyncio.to_thread(self.s3.head_object, Bucket=bucket, Key=key)
        except ClientError as e:
            if e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                return -1
            raise
        return int(head.get("ContentLength", 0))

    @activity.defn(name=STAMP_BY_HAND)
    async def stamp_object(self, s: Stamp) -> str:
        info = activity.info()
        key = f"{info.workflow_id}/{info.activity_id}"
        source, fresh = await asyncio.gather(
            self.size(s.bucket, s.source),
            self.intent(key, info.workflow_id or "", int(info.activity_id), "stamp_object",
                        {"bucket": s.bucket, "source": s.source, "key": s.key},
                        f"bucket:{s.bucket}"))
        if fresh:
            if source <= 0:
                await self.refuse(key, f"s3://{s.bucket}/{s.source} does not exist or is empty")
            await asyncio.to_thread(self.s3.put_object, Bucket=s.bucket, Key=s.key, Body=b"ok")
            written, _ = await asyncio.gather(self.size(s.bucket, s.key),
                                              self.outcome(key, "done", {"answer": s.key}))
        else:
            written = await self.size(s.bucket, s.key)
        if written <= 0:
            raise ApplicationError(f"s3://{s.bucket}/{s.key} is not there after the put",
                                   type="postcondition_unmet", non_retryable=True)
        return s.key
