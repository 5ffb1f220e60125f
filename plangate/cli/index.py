"""``plangate index rebuild``: plangate's runs index written again from Temporal
(``client.rebuild``)."""

from __future__ import annotations

import argparse
import sys

from plangate.cli.command import EXIT_NOT_SUCCEEDED, EXIT_OK, Command, api, index_world
from plangate.plans.visible import visible
from plangate.plans.words import many
from plangate.world.settings import Settings


async def _rebuild(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.rebuild import rebuild

    plangate = await api(settings)
    world = await index_world(settings)
    if world is None:
        return EXIT_NOT_SUCCEEDED
    try:
        if not await plangate.search_attributes_registered():
            print(visible(f"plangate: namespace {settings.temporal.namespace} has no plangate "
                          "search attributes: the runs index is not read there"), file=sys.stderr)
            return EXIT_NOT_SUCCEEDED
        got = await rebuild(plangate.client, world, settings.temporal.task_queue)
    finally:
        await world.close()
    print(visible(f"plangate: the runs index of {settings.temporal.task_queue}: "
                  f"{many(got.written, 'run')} written from Temporal, {many(got.deleted, 'row')} "
                  "of runs it no longer lists deleted"))
    if got.unanswered:
        print(visible(f"plangate: {many(len(got.unanswered), 'run')} awaiting approval did not "
                      "answer (their cards are not in the index): "
                      f"{', '.join(got.unanswered[:20])}"),
              file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    return EXIT_OK


INDEX = Command(
    "index", help="plangate's runs index (the card list and runs read it first)",
    description="plangate's own index of its runs in the deployment's Postgres: written by the "
                "workers as runs change, checked against Temporal by each reader.",
    subcommands=(
        Command("rebuild", help="write the runs index again from Temporal's visibility",
                description="Write every run of the task queue into the runs index as "
                            "Temporal lists it (the cards of those awaiting approval read from "
                            "Temporal too); delete the rows of runs it no longer lists.",
                run=_rebuild),
    ),
)
