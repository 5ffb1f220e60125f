"""``ticket_status(ticket_id, want)``: a probe of the extension's own, for a plan's pre and post
conditions ("the ticket is still open")."""

from __future__ import annotations

from plangate import ProbeArgs, ProbeContext, ToolError, Verdict, World, probe
from plangate_tickets import client
from plangate_tickets.tools import Status, TicketId


class TicketStatus(ProbeArgs):
    ticket_id: TicketId
    want: Status


@probe("ticket_status", TicketStatus, system="tickets")
async def ticket_status(args: TicketStatus, world: World, ctx: ProbeContext) -> Verdict:
    """Holds when the ticket is at ``want``. A ticket that does not exist is not at any status
    (violated); a service that does not answer raises: the probe could not answer."""
    try:
        ticket = await client.call(world, "GET", args.ticket_id)
    except ToolError as e:
        if e.code != "not_found":
            raise
        return Verdict(False, None, f"no ticket {args.ticket_id}")
    seen = {"status": ticket.get("status"), "etag": ticket.get("etag")}
    ok = seen["status"] == args.want
    return Verdict(ok, seen, "" if ok else f"ticket {args.ticket_id} is {seen['status']}")
