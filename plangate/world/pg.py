"""Postgres helpers shared by tools and probes: identifiers, error mapping, and the transaction
a tool acts in (under the authority of the principal its run acts for)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import PoolTimeout

from plangate.plans.scope import table_parts
from plangate.world.clients import World
from plangate.world.errors import ToolError


def ident(name: str) -> sql.Identifier:
    """``schema.table`` or ``table`` (``public.table``, not whatever the search path finds: the
    scope judged that name) as a quoted identifier; never string-formatted into SQL."""
    return sql.Identifier(*table_parts(name))


# to_regclass of a name as ``ident`` quotes it (schema, table as parameters), not as the text
# would read (case folded, search path)
REGCLASS = "to_regclass(quote_ident(%s) || '.' || quote_ident(%s))"


def to_tool_error(e: Exception, what: str) -> ToolError:
    # the session ended by Postgres while the worker could not speak (a pause, a partition:
    # ``world.clients.PG_IDLE_IN_TRANSACTION``): its transaction rolled back, not a refusal
    quiet = psycopg.errors.IdleInTransactionSessionTimeout
    if isinstance(e, PoolTimeout | psycopg.OperationalError | quiet):
        return ToolError("unavailable", f"{what}: {e}")
    if isinstance(e, psycopg.errors.InsufficientPrivilege):
        return ToolError("authority_revoked", f"{what}: {e}")
    if isinstance(e, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedColumn):
        return ToolError("not_found", f"{what}: {e}")
    if isinstance(e, psycopg.errors.SerializationFailure | psycopg.errors.DeadlockDetected):
        return ToolError("unavailable", f"{what}: {e}")
    return ToolError("invalid_state", f"{what}: {type(e).__name__}: {e}")


async def act_as(conn: psycopg.AsyncConnection[Any], principal: str | None) -> None:
    """Make the rest of ``conn``'s current transaction run under the Postgres role named
    ``principal`` (the run's ``on_behalf_of``; the role name *is* the principal name, case
    included): ``SET LOCAL ROLE``, so the role's grants are re-checked by Postgres at every
    statement the tool makes, now, not when the plan was made, and the pooled connection goes
    back to the worker's own role when the transaction ends. ``None``: the worker's own role.

    A role that does not exist, or that the worker may not become, is authority gone:
    ``authority_revoked`` (403). A privilege the role lacks surfaces later, at the statement
    that needs it, as ``InsufficientPrivilege``, which ``to_tool_error`` maps to the same code.

    Only tools act under it. Probes keep reading as the worker's own role: they are read-only,
    and a probe that could not see a table would answer "unknown" about the world, not about
    the principal's authority, which the tool re-checks when it acts."""
    if principal is None:
        return
    # A plan names whom it acts for; it never gets a superuser's rights (nor a role that
    # ignores row security) by naming one.
    cur = await conn.execute(
        "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = %s", (principal,)
    )
    row = await cur.fetchone()
    if row is not None and row[0]:
        raise ToolError(
            "not_permitted", f"{principal!r} is a superuser role: a run never acts as one",
            {"on_behalf_of": principal},
        )
    # An identifier, quoted by psycopg: a name with a dot, an @ or a quote is one role name.
    stmt = sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(principal))
    try:
        await conn.execute(stmt)
    except (psycopg.errors.InvalidParameterValue, psycopg.errors.InsufficientPrivilege) as e:
        # 22023 "role ... does not exist", 42501 "permission denied to set role ..."
        raise ToolError(
            "authority_revoked", f"cannot act for {principal!r}: {e}", {"on_behalf_of": principal}
        ) from e


async def as_worker(conn: psycopg.AsyncConnection[Any]) -> None:
    """Back to the worker's own role for the rest of the transaction: for plangate's own
    bookkeeping in a tool's transaction (a load's record in ``plangate.loads``), which the
    principal is not granted and need not be."""
    await conn.execute("SET LOCAL ROLE NONE")


# What the current task's tool transactions do last, before they commit (the effect ledger's
# mark: ``world.ledger.in_effect``); None: nothing.
BeforeCommit = Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]]
BEFORE_COMMIT: contextvars.ContextVar[BeforeCommit | None] = contextvars.ContextVar(
    "plangate_before_commit", default=None
)


@asynccontextmanager
async def reading(world: World) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A pooled connection each statement of which is its own transaction (autocommit), for a
    probe's reads and the effect ledger's rows: a read sees what READ COMMITTED would show it
    either way, and a statement takes one round trip, not three (BEGIN, it, COMMIT). The
    connection goes back to the pool as it came."""
    pool = await world.pool()
    async with pool.connection() as conn:
        await conn.set_autocommit(True)
        try:
            yield conn
        finally:
            # fails only on a broken connection, which the pool then discards
            with contextlib.suppress(psycopg.Error):
                await conn.set_autocommit(False)


@asynccontextmanager
async def tool_transaction(
    world: World, on_behalf_of: str | None
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A pooled connection in one transaction that runs as ``on_behalf_of`` (``act_as``) from
    its first statement. Every tool that acts on Postgres opens its transaction here. A call
    the effect ledger records marks its row done in this same transaction, just before it
    commits (``BEFORE_COMMIT``, set by ``world.ledger.in_effect``)."""
    pool = await world.pool()
    async with pool.connection() as conn, conn.transaction():
        await act_as(conn, on_behalf_of)
        yield conn
        mark = BEFORE_COMMIT.get()
        if mark is not None:
            await mark(conn)
