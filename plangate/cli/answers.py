"""The answers to an approval card: ``approve`` and ``reject``, by the card's digest, signed
with an approver key (``PLANGATE_APPROVER_KEY``)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from plangate.cli.command import EXIT_OK, Command, UsageError, api
from plangate.plans.visible import visible
from plangate.world.settings import Settings

if TYPE_CHECKING:
    from plangate.client.api import PendingCard, Plangate
    from plangate.records.approvals import ApprovalReceipt

_DIGEST = re.compile(r"[0-9a-fA-F]{64}")


def _arguments(p: argparse.ArgumentParser, *, reason: bool) -> None:
    p.add_argument("id", help="the run id (its workflow id), as run and runs print it")
    p.add_argument("--step", type=int, required=True, metavar="N",
                   help="the step whose card it answers (its n, as status shows it)")
    p.add_argument("--digest", required=True, metavar="HEX",
                   help="the card's SHA-256 (64 hexadecimal digits), as status shows it")
    if reason:
        p.add_argument("--reason", required=True, metavar="TEXT",
                       help="why: recorded with the answer in the run's report")
    p.add_argument("--as", dest="requester", default="", metavar="NAME",
                   help="which approver key of PLANGATE_APPROVER_KEY signs the answer "
                   "(default: the first); the answer is recorded under its name")


async def _answer(args: argparse.Namespace, settings: Settings,
                  send: Callable[[Plangate, PendingCard], Awaitable[ApprovalReceipt]]) -> int:
    """Check the digest's form and the key, fetch the card the run publishes for the step and
    show it (stderr: stdout keeps the one receipt line), then ``send`` the answer through
    the API, which signs only that card."""
    from plangate.client.api import AnswerRefused, NoApproverKey, RunEnded, UnknownRun
    from plangate.client.shown import signing_lines

    if not _DIGEST.fullmatch(args.digest):
        given = args.digest if len(args.digest) <= 80 else args.digest[:80] + "..."
        raise UsageError(f"{args.command}: --digest {given} is not a card's digest: 64 "
                         "hexadecimal digits (its SHA-256, as status shows it)")
    args.digest = args.digest.lower()  # as the card's digest is written
    plangate = await api(settings)
    try:
        plangate.approver_key(args.requester)  # before any call: a missing key is bad usage
    except NoApproverKey as e:
        raise UsageError(f"{args.command}: {e}") from None
    try:
        shown = await plangate.published_card(args.id, args.step, args.digest)
        for line in signing_lines(shown, args.command):
            print(visible(line), file=sys.stderr)
        receipt = await send(plangate, shown)  # the card shown is the one signed
    except (AnswerRefused, RunEnded) as e:
        raise UsageError(f"{args.command} refused: {e}") from None
    except UnknownRun as e:
        raise UsageError(f"{e} on {settings.temporal.address}") from None
    print(visible(f"plangate: step {receipt.step} of {args.id}: {receipt.decision} recorded at "
                  f"{receipt.at.isoformat()}"))
    return EXIT_OK


async def _approve(args: argparse.Namespace, settings: Settings) -> int:
    return await _answer(args, settings, lambda plangate, shown: plangate.approve(
        args.id, args.step, args.digest, by=args.requester, shown=shown))


async def _reject(args: argparse.Namespace, settings: Settings) -> int:
    return await _answer(args, settings, lambda plangate, shown: plangate.reject(
        args.id, args.step, args.digest, reason=args.reason, by=args.requester, shown=shown))


APPROVE = Command(
    "approve", help="approve the card of a step by its digest",
    description="Approve the approval card of a step, by the digest status shows, signed with "
                "your approver key (PLANGATE_APPROVER_KEY). The card is fetched from the run "
                "and shown (stderr) before it is signed; a digest the run does not publish "
                "for the step, or a workflow that is not a plangate run of this deployment, "
                "is refused (exit 2) and nothing is signed.",
    run=_approve, arguments=lambda p: _arguments(p, reason=False),
)
REJECT = Command(
    "reject", help="reject the card of a step, with a reason",
    description="Reject the approval card of a step, with a reason, signed with your approver "
                "key (PLANGATE_APPROVER_KEY); the step follows its on_unmet. The card is "
                "fetched and shown first, as approve does.",
    run=_reject, arguments=lambda p: _arguments(p, reason=True),
)
