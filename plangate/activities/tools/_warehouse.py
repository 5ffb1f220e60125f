"""What the warehouse tools do (declared in ``plangate.activities.tools.warehouse``)."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import json
import re
from typing import Any

import psycopg
from psycopg import sql
from pydantic import JsonValue

from plangate.activities.tools._statements import BUILDS
from plangate.activities.tools.registry import CallContext
from plangate.activities.tools.statements import STATEMENTS
from plangate.activities.tools.warehouse import LoadArgs, RunSqlArgs
from plangate.plans.words import many
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.pg import as_worker, ident, to_tool_error, tool_transaction
from plangate.world.runfiles import RunFiles

_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

# In the load's own transaction: what the table now holds is this source, this many rows.
RECORD_LOAD = """
INSERT INTO plangate.loads (target, source_sha256, rows, idempotency_key)
VALUES (%s, %s, %s, %s)
ON CONFLICT (target) DO UPDATE SET source_sha256 = EXCLUDED.source_sha256,
    rows = EXCLUDED.rows, idempotency_key = EXCLUDED.idempotency_key, loaded_at = now()
"""


def _read_csv(path: str, files: RunFiles) -> tuple[list[str], bytes, str]:
    data = files.read(path)
    header = next(csv.reader(io.StringIO(data.decode("utf-8", errors="replace"))), [])
    bad = [c for c in header if not _COLUMN.match(c)]
    if not header or bad:
        raise ToolError("bad_arguments", f"{path}: header columns not usable as names: {bad}")
    return header, data, hashlib.sha256(data).hexdigest()


async def _create_if_missing(cur: psycopg.AsyncCursor[Any], target: str, header: list[str]) -> None:
    """The target's schema and table, unless they exist. Only when missing: ``CREATE ... IF NOT
    EXISTS`` checks the privilege to create before it looks, so a principal granted a load into
    an existing table (INSERT, TRUNCATE) without the right to create would be refused."""
    await cur.execute("SELECT to_regclass(%s) IS NOT NULL", (ident(target).as_string(cur),))
    row = await cur.fetchone()
    if row is not None and row[0]:
        return
    if "." in target:
        schema = target.split(".", 1)[0]
        await cur.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        if await cur.fetchone() is None:
            await _created(
                cur, sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)),
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", schema,
            )
    coldefs = sql.SQL(", ").join(sql.SQL("{} text").format(sql.Identifier(c)) for c in header)
    await _created(
        cur, sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(ident(target), coldefs),
        "SELECT 1 WHERE to_regclass(%s) IS NOT NULL", ident(target).as_string(cur),
    )


async def _created(
    cur: psycopg.AsyncCursor[Any], create: sql.Composed, exists: str, name: str
) -> None:
    """``IF NOT EXISTS`` is not safe against a concurrent load creating the same schema or
    table: the loser fails on a unique index of the catalogue. That is all right only if the
    object now exists (``exists`` finds it); anything else is the error it was. In a savepoint,
    so the load's transaction goes on."""
    try:
        async with cur.connection.transaction():
            await cur.execute(create)
    except psycopg.errors.UniqueViolation:
        await cur.execute(exists, (name,))
        if await cur.fetchone() is None:
            raise


async def warehouse_load(args: LoadArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    try:
        header, data, sha256 = await asyncio.to_thread(_read_csv, args.source, call.files)
    except FileNotFoundError as e:
        raise ToolError("not_found", f"source file {args.source}") from e
    table = ident(args.target)
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in header)
    try:
        async with (
            tool_transaction(world, call.on_behalf_of) as conn,
            conn.cursor() as cur,
        ):
            await _create_if_missing(cur, args.target, header)
            # A load replaces the table's contents: running it twice leaves one copy.
            await cur.execute(sql.SQL("TRUNCATE {}").format(table))
            copy_stmt = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT csv, HEADER true)")
            async with cur.copy(copy_stmt.format(table, cols)) as copy:
                await copy.write(data)
            rows = cur.rowcount
            if args.min_rows is not None and rows < args.min_rows:
                # Raising inside the transaction rolls the load back: check and act are one.
                raise ToolError(
                    "too_few_rows",
                    f"{args.target}: {many(rows, 'row')} loaded, at least {args.min_rows} required",
                    {"rows": rows, "min_rows": args.min_rows},
                )
            # plangate's own record of the load, in the same transaction, as the worker
            await as_worker(conn)
            await cur.execute(RECORD_LOAD, (args.target, sha256, rows, call.idempotency_key))
    except ToolError:
        raise
    except (psycopg.Error, OSError) as e:
        raise to_tool_error(e, f"load {args.target}") from e
    return {"rows": rows, "target": args.target, "source_sha256": sha256}


# What a run_sql result may carry: a step's result lives in the workflow's history.
MAX_ROWS = 1000
MAX_ROWS_BYTES = 128 * 1024


def _cell(v: object) -> JsonValue:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return str(v)  # dates, decimals, UUIDs: as Postgres would print them


async def _bounded_rows(cur: psycopg.AsyncCursor[Any]) -> tuple[list[JsonValue], bool]:
    """At most MAX_ROWS rows and MAX_ROWS_BYTES of them as JSON; whether any were cut."""
    out: list[JsonValue] = []
    size = 0
    while True:
        batch = await cur.fetchmany(200)
        if not batch:
            return out, False
        for r in batch:
            row: list[JsonValue] = [_cell(v) for v in r]
            size += len(json.dumps(row, default=str))
            if len(out) >= MAX_ROWS or size > MAX_ROWS_BYTES:
                return out, True
            out.append(row)


async def warehouse_run_sql(
    args: RunSqlArgs, world: World, call: CallContext
) -> dict[str, JsonValue]:
    stmt = STATEMENTS[args.statement]  # RunSqlArgs checked the name and the parameters
    params = stmt.params.model_validate(args.params)
    try:
        async with (
            tool_transaction(world, call.on_behalf_of) as conn,
            conn.cursor() as cur,
        ):
            await cur.execute(BUILDS[args.statement](params, call.run_id))
            if cur.description is None:
                return {"rowcount": cur.rowcount, "rows": [], "truncated": False}
            columns: list[JsonValue] = [c.name for c in cur.description]
            rows, truncated = await _bounded_rows(cur)
            return {"rowcount": cur.rowcount, "columns": columns, "rows": list[JsonValue](rows),
                    "truncated": truncated}
    except psycopg.Error as e:
        raise to_tool_error(e, f"statement {args.statement}") from e
