"""``plangate grant issue|list|revoke``: standing grants (``client.grants``), issued with an
approver key (``PLANGATE_APPROVER_KEY``), in the deployment's Postgres."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from plangate.cli.command import EXIT_OK, Command, UsageError
from plangate.cli.runs import whoami
from plangate.plans.visible import visible
from plangate.world.settings import Settings

if TYPE_CHECKING:
    from plangate.world.clients import World
    from plangate.world.grants import Listed


def _value(text: str) -> str | int | bool:
    """An ``--arg`` value as JSON would read it where it is a whole number or a boolean (an
    account id stays a string)."""
    if text in ("true", "false"):
        return text == "true"
    if text.lstrip("-").isdigit() and len(text) < 16:
        return int(text)
    return text


async def _issue(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.answers import approver_key
    from plangate.client.errors import NoApproverKey
    from plangate.client.grants import BadGrant, duration, issued, pairs, terms

    try:
        key = approver_key(settings, args.requester)
        t = terms(settings.catalogue, key, tool=args.tool, principal=args.principal,
                  equals={k: _value(v) for k, v in pairs(args.arg, "--arg").items()},
                  at_most=pairs(args.at_most, "--at-most"), prefix=pairs(args.prefix, "--prefix"),
                  uses=args.uses, expires_in=duration(args.expires_in), note=args.note)
    except (BadGrant, NoApproverKey) as e:
        raise UsageError(f"grant issue: {e}") from None
    async with _world(settings) as world:
        grant = await issued(world, key, t)
    print(visible(f"plangate: grant {grant.grant_id}: {grant.terms.words()}"))
    return EXIT_OK


async def _list(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.world.grants import listed

    async with _world(settings) as world:
        got = await listed(world, live_only=args.live)
    now = datetime.now(UTC)
    for g in got:
        print(visible(f"{g.grant.grant_id}  {g.used}/{g.grant.terms.uses} used  "
                      f"{state(g, now)}  {g.grant.terms.words()}"))
    return EXIT_OK


def state(g: Listed, now: datetime) -> str:
    """A listed grant's state in words: revoked (when, by whom), expired, used up, or live."""
    if g.revoked_at is not None:
        return f"revoked {g.revoked_at.isoformat()} by {g.revoked_by}"
    if g.grant.terms.expires_at <= now:
        return "expired"
    return "used up" if g.used >= g.grant.terms.uses else "live"


async def _revoke(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.grants import BadGrant, revoked

    try:
        async with _world(settings) as world:
            at = await revoked(world, args.grant_id, args.by or whoami() or "cli")
    except BadGrant as e:
        raise UsageError(f"grant revoke: {e}") from None
    print(visible(f"plangate: grant {args.grant_id} revoked at {at.isoformat()}: it admits "
                  "no further call"))
    return EXIT_OK


@contextlib.asynccontextmanager
async def _world(settings: Settings) -> AsyncIterator[World]:
    from plangate.world.clients import World

    world = World(settings.world)
    try:
        yield world
    finally:
        await world.close()


def _issue_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tool", required=True, help="the tool the grant covers")
    p.add_argument("--principal", required=True,
                   help="who the runs it covers act for (their on_behalf_of)")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="an argument the call must carry with this value (repeatable)")
    p.add_argument("--at-most", action="append", default=[], metavar="NAME=N",
                   help="a number the call's argument must not exceed; the tool's amount in "
                        "its whole units (repeatable)")
    p.add_argument("--prefix", action="append", default=[], metavar="NAME=TEXT",
                   help="a string argument must begin with TEXT (repeatable)")
    p.add_argument("--uses", type=int, required=True, help="how many calls it covers")
    p.add_argument("--expires-in", required=True, metavar="DURATION",
                   help="how long it stands: 30m, 8h, 7d (at most 90d)")
    p.add_argument("--note", default="", help="why, in words (kept with the grant, signed)")
    p.add_argument("--as", dest="requester", default="", metavar="NAME",
                   help="which approver key of PLANGATE_APPROVER_KEY signs it (default: the "
                        "first)")


def _list_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--live", action="store_true", help="only grants neither revoked nor expired")


def _revoke_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("grant_id", help="the grant's id (64 hexadecimal digits, as list prints it)")
    p.add_argument("--by", default="",
                   help="who revokes it, recorded with it (default: your login name)")


GRANT = Command(
    "grant", help="standing grants: calls an approver allows without a card",
    description="Standing grants: an approver's signed word that calls of one tool, for one "
                "principal, within stated argument bounds, run without a card, a number of "
                "times, until a time. Kept in the deployment's Postgres.",
    subcommands=(
        Command("issue", help="issue a grant signed with your approver key",
                description="Issue a standing grant signed with PLANGATE_APPROVER_KEY, e.g. "
                            "--tool billing.issue_credit --principal P --arg account_id=acct_1 "
                            "--at-most amount_eur=50 --uses 5 --expires-in 8h. Bad terms: one "
                            "line, exit 2, nothing written.",
                run=_issue, arguments=_issue_arguments, connects=False),
        Command("list", help="list the grants and the uses each has given",
                description="Every standing grant, newest first: its id, uses given, state "
                            "and terms.",
                run=_list, connects=False, arguments=_list_arguments),
        Command("revoke", help="revoke a grant by its id: it admits no further call",
                description="Revoke a standing grant at once: no further call is covered, and "
                            "a call it covered that has not yet acted is refused at the call.",
                run=_revoke, connects=False, arguments=_revoke_arguments),
    ),
)
