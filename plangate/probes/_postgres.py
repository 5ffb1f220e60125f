"""What the Postgres probes do (declared in ``plangate.probes.postgres``)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from psycopg import sql

from plangate.plans.scope import table_parts
from plangate.plans.words import many
from plangate.probes.postgres import (
    ColumnArgs,
    IndexArgs,
    JobArgs,
    LoadedFromArgs,
    RowcountArgs,
)
from plangate.probes.registry import ProbeContext, Verdict
from plangate.world.pg import REGCLASS, ident, reading

if TYPE_CHECKING:
    from plangate.world.clients import World


async def _one(
    world: World, query: sql.SQL | sql.Composed | str, params: tuple[Any, ...] = ()
) -> Any:
    async with reading(world) as conn, conn.cursor() as cur:
        await cur.execute(query, params)
        row = await cur.fetchone()
        return None if row is None else row[0]


async def table_rowcount(args: RowcountArgs, world: World, ctx: ProbeContext) -> Verdict:
    if await _one(world, f"SELECT {REGCLASS}::text", table_parts(args.table)) is None:
        return Verdict(False, {"rows": 0}, f"table {args.table} does not exist")
    count = int(await _one(world, sql.SQL("SELECT count(*) FROM {}").format(ident(args.table))))
    observed = {"rows": count}
    if count < args.min:
        return Verdict(False, observed,
                       f"{args.table} has {many(count, 'row')}, at least {args.min} due")
    if args.max is not None and count > args.max:
        return Verdict(False, observed,
                       f"{args.table} has {many(count, 'row')}, at most {args.max} due")
    return Verdict(True, observed)


async def table_loaded_from(args: LoadedFromArgs, world: World, ctx: ProbeContext) -> Verdict:
    want = await asyncio.to_thread(ctx.files.sha256, args.source)
    if want is None:
        return Verdict(False, None, f"source file {args.source} is not there to compare with")
    async with reading(world) as conn, conn.cursor() as cur:
        await cur.execute(
            "SELECT source_sha256, rows FROM plangate.loads WHERE target = %s", (args.table,)
        )
        rec = await cur.fetchone()
        if rec is None:
            return Verdict(False, None, f"no load into {args.table} is recorded")
        # on this connection: a second one from the pool while holding the first can wait
        # forever when every connection is held by a read waiting for its second
        await cur.execute(f"SELECT {REGCLASS}::text", table_parts(args.table))
        exists = await cur.fetchone()
        if exists is None or exists[0] is None:
            return Verdict(False, None, f"table {args.table} does not exist")
        await cur.execute(sql.SQL("SELECT count(*) FROM {}").format(ident(args.table)))
        count_row = await cur.fetchone()
    have, rows = rec
    count = int(count_row[0]) if count_row else 0
    observed = {"source_sha256": have[:16], "rows": count}
    if have != want:
        return Verdict(
            False, observed, f"{args.table} holds a load of other content ({have[:12]}…, "
            f"not {args.source}'s {want[:12]}…)"
        )
    if count != rows:
        return Verdict(
            False, observed,
            f"{args.table} has {many(count, 'row')}; the load of {args.source} left {rows}"
        )
    return Verdict(True, observed)


async def column_exists(args: ColumnArgs, world: World, ctx: ProbeContext) -> Verdict:
    schema, table = table_parts(args.table)
    n = await _one(
        world,
        "SELECT count(*) FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = %s AND column_name = %s",
        (schema, table, args.column),
    )
    if int(n) == 1:
        return Verdict(True, {"column": args.column})
    return Verdict(False, None, f"{args.table}.{args.column} does not exist")


async def index_valid(args: IndexArgs, world: World, ctx: ProbeContext) -> Verdict:
    valid = await _one(
        world,
        "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
        (args.name,),
    )
    if valid is None:
        return Verdict(False, None, f"index {args.name} does not exist")
    if valid is not True:
        return Verdict(False, {"indisvalid": False}, f"index {args.name} is not valid")
    return Verdict(True, {"indisvalid": True})


# The job of the step's own run (set by its set_job_state) if there is one, else the outside
# world's (owner NULL): never another run's, so no run can satisfy another's wait.
JOB_STATE = """
SELECT state FROM plangate.jobs WHERE job_id = %s AND (owner = %s OR owner IS NULL)
ORDER BY owner IS NULL LIMIT 1
"""


async def job_state(args: JobArgs, world: World, ctx: ProbeContext) -> Verdict:
    state = await _one(world, JOB_STATE, (args.job_id, ctx.run_id))
    if state is None:
        return Verdict(False, None, f"job {args.job_id} does not exist")
    if state != args.want:
        return Verdict(False, {"state": state}, f"job {args.job_id} is {state}, not {args.want}")
    return Verdict(True, {"state": state})
