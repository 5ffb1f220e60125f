"""E-mail tools on ``demo.outbox``: ``email.send`` (external: the message leaves the
organisation once it is in the outbox) and ``email.get_message`` (its reader).

At most one message per idempotency key: a replay of a send returns the message the first
attempt queued, never a second one.
"""

from __future__ import annotations

from psycopg import sql
from pydantic import JsonValue, model_validator

from plangate.activities.tools.registry import CallContext, ToolArgs, tool
from plangate.demo._records import (
    EmailAddress,
    IdempotencyKey,
    RecordId,
    Row,
    columns,
    derived_id,
    fetch_one,
    json_row,
    read_by_key_or_id,
    transaction,
)
from plangate.plans.catalogue import Contract, Reader, Term
from plangate.plans.model import Effect
from plangate.plans.names import Identifier
from plangate.plans.scope import Writes
from plangate.world.clients import World
from plangate.world.errors import ToolError

_MESSAGE = columns(
    "message_id", "to_address", "template", "account_id", "idempotency_key", "created_at"
)

MESSAGE_READER = Reader("email.get_message", {"idempotency_key": "key"})


class SendArgs(ToolArgs):
    to: EmailAddress
    template: Identifier  # a template the mail system knows, by name: "account_closed"
    account_id: RecordId | None = None


class GetMessageArgs(ToolArgs):
    idempotency_key: IdempotencyKey | None = None  # of the email.send call that queued it
    message_id: RecordId | None = None

    @model_validator(mode="after")
    def _one_key(self) -> GetMessageArgs:
        if (self.idempotency_key is None) == (self.message_id is None):
            raise ValueError("give exactly one of idempotency_key and message_id")
        return self


def message_json(row: Row) -> dict[str, JsonValue]:
    """message_id, to, template, account_id, idempotency_key, created_at."""
    out = json_row(row, drop=("to_address",))
    return {"message_id": out.pop("message_id"), "to": row["to_address"], **out}


@tool("email.get_message", GetMessageArgs, Effect.READ)
async def get_message(
    args: GetMessageArgs, world: World, call: CallContext
) -> dict[str, JsonValue]:
    """A queued message, by ``message_id`` or by the idempotency key that sent it."""
    table = sql.Identifier("demo", "outbox")
    row = await read_by_key_or_id(
        world, call, table, _MESSAGE, "message_id", args.idempotency_key, args.message_id, "message"
    )
    return message_json(row)


@tool(
    "email.send",
    SendArgs,
    Effect.EXTERNAL,
    # read by this call's idempotency key: only this call's message can make it hold
    Contract(post=(Term("field_present", {}, {"path": "$.message_id"}, identifies=True),)),
    reader=MESSAGE_READER,
    writes=(Writes("table", name="demo.outbox"),),
)
async def send(args: SendArgs, world: World, call: CallContext) -> dict[str, JsonValue]:
    """Queues the message in the outbox. Returns {"message_id", "to", "template", "account_id",
    "idempotency_key", "created_at"}; the same key with other arguments is
    ``idempotency_conflict``."""
    key = call.idempotency_key
    async with transaction(world, call, f"send {args.template} to {args.to}") as cur:
        await cur.execute(
            sql.SQL(
                "INSERT INTO demo.outbox (message_id, to_address, template, account_id, "
                "idempotency_key) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (idempotency_key) DO NOTHING RETURNING {}"
            ).format(_MESSAGE),
            (derived_id("m", key), args.to, args.template, args.account_id, key),
        )
        row = await cur.fetchone()
        if row is None:  # this key already queued its message
            await cur.execute(
                sql.SQL("SELECT {} FROM demo.outbox WHERE idempotency_key = %s").format(_MESSAGE),
                (key,),
            )
            row = await fetch_one(cur, f"no message for {key}")
            if (row["to_address"], row["template"], row["account_id"]) != (
                args.to,
                args.template,
                args.account_id,
            ):
                raise ToolError(
                    "idempotency_conflict",
                    f"key {key} already sent {row['template']} to {row['to_address']}",
                    {"message_id": row["message_id"]},
                )
    return message_json(row)
