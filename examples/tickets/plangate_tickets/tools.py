"""``tickets.get`` and ``tickets.update``: a read tool, and a write tool whose contract plangate
checks by reading the ticket back over HTTP (through the reader, ``tickets.get``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, model_validator

from plangate import CallContext, Contract, Effect, Reader, Term, ToolArgs, World, tool
from plangate_tickets import client

TicketId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
Status = Literal["open", "in_progress", "closed"]

# how field probes (field_equals, ...) re-read the ticket a step touched
TICKET = Reader("tickets.get", {"ticket_id": "args.ticket_id"})


class GetTicket(ToolArgs):
    ticket_id: TicketId


class UpdateTicket(ToolArgs):
    ticket_id: TicketId
    status: Status | None = None
    assignee: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    # the ETag a read saw (bind it from tickets.get: "${etag}"): the write lands only if the
    # ticket is still at it, else 412 -> precondition_failed, and plangate re-evaluates the step
    if_match: str | None = None

    @model_validator(mode="after")
    def _changes_something(self) -> UpdateTicket:
        if self.status is None and self.assignee is None:
            raise ValueError("give status, assignee or both")
        return self


@tool("tickets.get", GetTicket, Effect.READ, reader=TICKET)
async def get_ticket(args: GetTicket, world: World, call: CallContext) -> dict[str, JsonValue]:
    """The ticket: id, title, status, assignee, version, etag."""
    return await client.call(world, "GET", args.ticket_id)


@tool(
    "tickets.update",
    UpdateTicket,
    Effect.WRITE,
    # what the call sets is what a fresh read of the ticket finds afterwards (a term binds only
    # when its argument is given); holding before the call, they let plangate skip it as done
    Contract(
        post=(
            Term("field_equals", {"value": "status"}, {"path": "$.status"}, identifies=True),
            Term("field_equals", {"value": "assignee"}, {"path": "$.assignee"}, identifies=True),
        )
    ),
    reader=TICKET,
)
async def update_ticket(
    args: UpdateTicket, world: World, call: CallContext
) -> dict[str, JsonValue]:
    """PATCHes the fields given. The call's idempotency key goes as ``Idempotency-Key``, so a
    retried call never writes twice; ``if_match`` as ``If-Match``."""
    headers = {"Idempotency-Key": call.idempotency_key}
    if args.if_match is not None:
        headers["If-Match"] = args.if_match
    changes = args.model_dump(include={"status", "assignee"}, exclude_none=True)
    return await client.call(world, "PATCH", args.ticket_id, changes, headers)
