"""What every command is made of: a :class:`Command` (its name, help, arguments and what runs),
the exit codes and :class:`UsageError`. Each command is declared once, in the module of its
group; ``plangate.cli.commands`` builds the parser and the dispatch from them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from plangate.plans.visible import visible
from plangate.records.report import RunReport, RunStatus
from plangate.world.settings import Settings

if TYPE_CHECKING:
    from plangate.client.api import Plangate
    from plangate.world.clients import World

EXIT_OK, EXIT_NOT_SUCCEEDED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE: what a shell reports of a Unix tool whose reader left

Runner = Callable[[argparse.Namespace, Settings], Awaitable[int]]


class UsageError(Exception):
    """Bad usage the user can correct: an unknown run id, a run id already in use."""


def _no_arguments(p: argparse.ArgumentParser) -> None:
    return None


@dataclass(frozen=True)
class Command:
    """One command: ``help`` is its line in its parent's ``--help``, ``description`` what its
    own ``--help`` opens with. A leaf has ``run``; a group (``key``, ``policy``) has
    ``subcommands`` instead, one of which is required."""

    name: str
    help: str
    description: str
    run: Runner | None = None
    arguments: Callable[[argparse.ArgumentParser], None] = _no_arguments
    connects: bool = True  # reads the Temporal profile (a check needs none)
    subcommands: tuple[Command, ...] = ()

    def add_to(self, parsers: argparse._SubParsersAction[argparse.ArgumentParser],
               parents: list[argparse.ArgumentParser]) -> None:
        """Its parser under ``parsers``; ``parents`` lend it ``--debug`` after its name, which a
        group and its subcommands do not take."""
        p = parsers.add_parser(self.name, parents=[] if self.subcommands else parents,
                               help=self.help, description=self.description)
        self.arguments(p)
        if self.run is not None:
            p.set_defaults(fn=self.run, connects=self.connects)
        if self.subcommands:
            names = ",".join(c.name for c in self.subcommands)
            sub = p.add_subparsers(dest=f"{self.name}_command", required=True,
                                   metavar=f"{{{names}}}")
            for c in self.subcommands:
                c.add_to(sub, [])


def exit_for(rep: RunReport) -> int:
    return EXIT_OK if rep.status is RunStatus.SUCCEEDED else EXIT_NOT_SUCCEEDED


async def index_world(settings: Settings) -> World | None:
    """The deployment's Postgres for reading the runs index; None where it does not answer at
    once (the readers then list from Temporal's visibility, and say so)."""
    from plangate.cli.services import check_postgres
    from plangate.errors import ServiceUnreachable
    from plangate.world.clients import World

    try:
        await check_postgres(settings.world)
    except ServiceUnreachable as e:
        print(visible(f"plangate: {e.service} at {e.where} could not be reached ({e.reason}): "
                      "the runs index is not read"), file=sys.stderr)
        return None
    return World(settings.world)


async def api(settings: Settings) -> Plangate:
    """The Python API on the deployment's Temporal (unreachable: one line, exit 1)."""
    from plangate.cli.services import connect
    from plangate.client.api import Plangate

    return Plangate(await connect(settings), settings)
