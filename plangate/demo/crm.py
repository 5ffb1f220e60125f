"""CRM tools on ``demo.customers``: ``customer.get``, ``customer.update``, ``customer.restore``.

Every write locks the record, checks it and writes it in one transaction, so the check the
tool makes and the write it makes are one operation. A write records the idempotency key that
made it (``last_write_key``): a replay of the same call finds its own write and returns the
record instead of writing again (or failing ``if_version`` against its own version bump).
"""

from __future__ import annotations

from typing import Literal

from psycopg import AsyncCursor, sql
from pydantic import Field, JsonValue, model_validator

from plangate.activities.tools.registry import CallContext, ToolArgs, tool
from plangate.demo._records import (
    EmailAddress,
    RecordId,
    Row,
    columns,
    fetch_one,
    json_row,
    transaction,
)
from plangate.plans.catalogue import Contract, Reader, Term, VersionBinding
from plangate.plans.model import Effect
from plangate.plans.scope import Writes
from plangate.world.clients import World
from plangate.world.errors import ToolError

_COLUMNS = columns(
    "account_id", "status", "archived", "archived_at", "billing_contact", "version",
    "last_write_key",
)
_INTERNAL = ("last_write_key",)

CUSTOMER_READER = Reader("customer.get", {"account_id": "args.account_id"})


class CustomerArgs(ToolArgs):
    account_id: RecordId


class UpdateArgs(ToolArgs):
    account_id: RecordId
    status: Literal["active", "closed"] | None = None
    billing_contact: EmailAddress | None = None
    # the version a probe observed: the write happens only if the record is still at it
    if_version: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _changes_something(self) -> UpdateArgs:
        if self.status is None and self.billing_contact is None:
            raise ValueError("give status, billing_contact or both")
        return self


def customer_json(row: Row) -> dict[str, JsonValue]:
    """account_id, status, archived, archived_at (ISO 8601, Z, or null), billing_contact,
    version."""
    return json_row(row, drop=_INTERNAL)


async def _read(cur: AsyncCursor[Row], account_id: str, lock: bool) -> Row:
    query = sql.SQL("SELECT {} FROM demo.customers WHERE account_id = %s{}").format(
        _COLUMNS, sql.SQL(" FOR UPDATE" if lock else "")
    )
    await cur.execute(query, (account_id,))
    return await fetch_one(cur, f"no customer {account_id}", {"account_id": account_id})


@tool("customer.get", CustomerArgs, Effect.READ, reader=CUSTOMER_READER)
async def customer_get(args: CustomerArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    """account_id, status, archived, archived_at, billing_contact, version."""
    async with transaction(world, call, f"read customer {args.account_id}") as cur:
        return customer_json(await _read(cur, args.account_id, lock=False))


@tool(
    "customer.update",
    UpdateArgs,
    Effect.WRITE,
    # what the call sets is what a fresh read finds afterwards (a term binds only when given)
    Contract(
        post=(
            Term("field_equals", {"value": "status"}, {"path": "$.status"}, identifies=True),
            Term(
                "field_equals",
                {"value": "billing_contact"},
                {"path": "$.billing_contact"},
                identifies=True,
            ),
        )
    ),
    reader=CUSTOMER_READER,
    # the record version its pre probe read: a record moved in between is refused (409)
    version=VersionBinding("if_version", Term("field_present", {}, {"path": "$.version"})),
    writes=(Writes("table", name="demo.customers"),),
)
async def customer_update(
    args: UpdateArgs, world: World, call: CallContext
) -> dict[str, JsonValue]:
    """Refuses an archived record with ``record_archived`` (409, its ``archived_at`` in the
    data) and a record no longer at ``if_version`` with ``resource_moved`` (409). The refusal is
    made under the row lock, in the same transaction as the write: no check-to-use window."""
    async with transaction(world, call, f"update customer {args.account_id}") as cur:
        row = await _read(cur, args.account_id, lock=True)
        if row["last_write_key"] == call.idempotency_key:
            return customer_json(row)  # a replay: this call's write is the current record
        if row["archived"]:
            archived_at = customer_json(row)["archived_at"]
            raise ToolError(
                "record_archived",
                f"customer {args.account_id} was archived at {archived_at}",
                {"account_id": args.account_id, "archived_at": archived_at},
            )
        if args.if_version is not None and row["version"] != args.if_version:
            raise ToolError(
                "resource_moved",
                f"customer {args.account_id} is at version {row['version']}, "
                f"not {args.if_version}",
                {"account_id": args.account_id, "expected": args.if_version,
                 "current": row["version"]},
            )
        await cur.execute(
            sql.SQL(
                "UPDATE demo.customers SET status = coalesce(%s, status), "
                "billing_contact = coalesce(%s, billing_contact), version = version + 1, "
                "last_write_key = %s WHERE account_id = %s RETURNING {}"
            ).format(_COLUMNS),
            (args.status, args.billing_contact, call.idempotency_key, args.account_id),
        )
        return customer_json(await fetch_one(cur, f"no customer {args.account_id}"))


@tool(
    "customer.restore",
    CustomerArgs,
    Effect.WRITE,
    Contract(
        post=(Term("field_equals", {}, {"path": "$.archived", "value": False}, identifies=True),)
    ),
    reader=CUSTOMER_READER,
    writes=(Writes("table", name="demo.customers"),),
)
async def customer_restore(
    args: CustomerArgs, world: World, call: CallContext
) -> dict[str, JsonValue]:
    """Un-archives the record (archived false, archived_at null, version bumped). A record that
    is not archived is returned as it is: restoring is idempotent."""
    async with transaction(world, call, f"restore customer {args.account_id}") as cur:
        row = await _read(cur, args.account_id, lock=True)
        if not row["archived"]:
            return customer_json(row)
        await cur.execute(
            sql.SQL(
                "UPDATE demo.customers SET archived = false, archived_at = NULL, "
                "version = version + 1, last_write_key = %s WHERE account_id = %s "
                "RETURNING {}"
            ).format(_COLUMNS),
            (call.idempotency_key, args.account_id),
        )
        return customer_json(await fetch_one(cur, f"no customer {args.account_id}"))
