"""What the demo record tools (billing, CRM, e-mail) share: identifier types, one transaction
with dict rows and mapped errors, acting for the run's principal, and the JSON shape of dates and
money."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any

import psycopg
from psycopg import AsyncCursor, sql
from psycopg.rows import dict_row
from pydantic import JsonValue, StringConstraints

from plangate.activities.tools.registry import CallContext
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.pg import to_tool_error, tool_transaction

# "acct_3319f", "in_88a2", "sub_71c2", "cr_4a90", "m_5518": a record id, never anything else
RecordId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")]
EmailAddress = Annotated[
    str, StringConstraints(pattern=r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]+$", max_length=254)
]
# the idempotency key of an earlier call: "<workflow id>/v<plan version>/<step n>"
IdempotencyKey = Annotated[str, StringConstraints(min_length=1, max_length=512)]

Row = dict[str, Any]


@asynccontextmanager
async def transaction(
    world: World, call: CallContext, what: str
) -> AsyncIterator[AsyncCursor[Row]]:
    """A cursor in one transaction, under the role of the principal ``call`` acts for
    (``world.pg.tool_transaction``; a probe's reader call acts for nobody: the worker's role);
    a ToolError raised inside rolls it back, a database error becomes the ToolError
    ``world.pg.to_tool_error`` says (a privilege the role lacks: ``authority_revoked``)."""
    try:
        async with (
            tool_transaction(world, call.on_behalf_of) as conn,
            conn.cursor(row_factory=dict_row) as cur,
        ):
            yield cur
    except ToolError:
        raise
    except psycopg.Error as e:
        raise to_tool_error(e, what) from e


def columns(*names: str) -> sql.Composed:
    """A column list for a query: each name an ``sql.Identifier``, never text pasted in."""
    return sql.SQL(", ").join(sql.Identifier(n) for n in names)


async def fetch_one(cur: AsyncCursor[Row], what: str, data: JsonValue = None) -> Row:
    """The row a statement returned; none means the record is not there (``not_found``)."""
    row = await cur.fetchone()
    if row is None:
        raise ToolError("not_found", what, data)
    return row


def iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


def euros(amount: Decimal | float) -> float:
    return float(round(Decimal(str(amount)), 2))


def cents(amount: float) -> Decimal:
    """An amount a plan gives (a JSON number) as the numeric(12,2) Postgres stores."""
    return round(Decimal(str(amount)), 2)


def derived_id(prefix: str, key: str) -> str:
    """The id of the record a call with idempotency key ``key`` creates: a replay of the call
    names the same record."""
    return f"{prefix}_{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def json_row(row: Row, drop: tuple[str, ...] = ()) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {}
    for k, v in row.items():
        if k in drop:
            continue
        if isinstance(v, datetime):
            out[k] = iso(v)
        elif isinstance(v, Decimal):
            out[k] = euros(v)
        else:
            out[k] = v
    return out


async def read_by_key_or_id(
    world: World,
    call: CallContext,
    table: sql.Composable,
    cols: sql.Composable,
    id_column: str,
    key: str | None,
    record_id: str | None,
    what: str,
) -> Row:
    """The record a call with idempotency key ``key`` made, or the one with ``record_id``."""
    column = sql.Identifier("idempotency_key" if key is not None else id_column)
    value = key if key is not None else record_id
    async with transaction(world, call, f"read {what}") as cur:
        query = sql.SQL("SELECT {} FROM {} WHERE {} = %s").format(cols, table, column)
        await cur.execute(query, (value,))
        return await fetch_one(cur, f"no {what} for {value}")
