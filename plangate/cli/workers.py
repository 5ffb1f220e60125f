"""The commands of a deployment's workers: ``worker`` (poll the task queue, or with
``--check`` only check what a worker needs) and ``setup`` (plangate's tables, made by the role
that is to own them)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from plangate.cli.command import EXIT_NOT_SUCCEEDED, EXIT_OK, Command
from plangate.plans.visible import visible
from plangate.world.settings import Settings

if TYPE_CHECKING:
    from temporalio.client import Client


def _worker_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-setup", action="store_true",
                   help="do not create plangate's tables (`plangate setup` did, as their "
                   "owner): only check that they are there")
    p.add_argument("--check", action="store_true",
                   help="check that the services answer (and, with --no-setup, the tables) "
                   "and that the MCP servers it guards list what their file declares, as the "
                   "worker checks at start, then exit without polling: a health check")


async def _worker(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.activities.bootstrap import SchemaNotReady, require_schema
    from plangate.activities.extensions import registry_for
    from plangate.cli.services import check_worker_services
    from plangate.worker.assembly import build_worker, policy_check, start_checks
    from plangate.world.clients import World

    # its policies first (no service needed to refuse a bad file), then Temporal, Postgres and
    # S3: a worker that could do no work says which is missing. The bundle is said when
    # PLANGATE_POLICIES is set (unset: the built-ins, the approval rule says them)
    bundle = policy_check(settings)
    policies = [bundle] if settings.policy.policies else []
    client = await check_worker_services(settings)
    world = World(settings.world)
    found: list[str] = []
    try:
        if args.no_setup:  # its role may not create plangate's tables: they must be there
            await require_schema(world)
        if args.check:  # the worker's own start checks: the MCP servers it guards connected
            found = await start_checks(registry_for(settings.catalogue), world)
        else:
            worker = await build_worker(client, settings, world, bootstrap=not args.no_setup)
            keys = settings.encryption.key_ids
            encrypted = f" (payloads encrypted with key {keys[0]})" if keys else ""
            print(f"plangate: worker polling {worker.config()['task_queue']} on "
                  f"{settings.temporal.address}{encrypted}")
            print(f"plangate: {settings.policy.approval_rule()}", flush=True)
            for line in policies:
                print(f"plangate: {line}", flush=True)
            metrics_address = settings.observability.metrics_address
            if metrics_address:
                from plangate.worker.metrics import url

                print(f"plangate: metrics: {url(metrics_address)}", flush=True)
            await worker.run()
            return EXIT_OK
    except SchemaNotReady as e:
        print(f"plangate: {e}", file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    finally:
        await world.close()
    services = ("Temporal, Postgres and S3" if settings.world.s3_endpoint_url
                else "Temporal and Postgres")
    print(f"plangate: {services} answer"
          + (" and plangate's tables are there" if args.no_setup else ""))
    print(f"plangate: {settings.policy.approval_rule()}")
    for line in [*policies, *found]:
        print(visible(f"plangate: {line}"))
    for line in await _queue_workers(client, settings):
        print(visible(f"plangate: {line}"))
    return EXIT_OK


async def _queue_workers(client: Client, settings: Settings) -> list[str]:
    """Who polls the deployment's queue, by catalogue, compared with this worker's: a line
    each, and one more when they are mixed (``plangate.client.placement``); none when nobody
    polls."""
    from plangate.activities.catalogue import announced
    from plangate.activities.extensions import registry_for
    from plangate.client.placement import workers
    from plangate.records.placement import Announced, catalogue_queue

    queue = settings.temporal.task_queue
    found = await workers(client, settings.temporal)
    if not found.announcing and not found.unannounced:
        return []  # nobody polls: nothing to compare
    mine = announced(settings.catalogue)
    registry = registry_for(settings.catalogue)
    by: dict[Announced, list[str]] = {}
    for p in found.announcing:
        by.setdefault(p.catalogue, []).append(p.identity)
    lines = [f"this worker's catalogue {mine.digest}: task queue "
             f"{catalogue_queue(queue, mine.digest)}"]
    for cat, who in sorted(by.items(), key=lambda x: x[0].digest):
        n = f"{len(who)} worker{'s' if len(who) != 1 else ''} ({', '.join(sorted(who))})"
        if cat.digest == mine.digest:
            lines.append(f"catalogue {cat.digest} (this worker's): {n}")
            continue
        lacking = cat.lacks(registry.tools, registry.probes)
        what = ("names not announced" if lacking is None
                else f"lacks {', '.join(lacking)}" if lacking
                else "has this worker's names and more")
        lines.append(f"catalogue {cat.digest}: {n}; {what}")
    if found.unannounced:
        lines.append(
            f"{len(found.unannounced)} worker(s) take runs from task queue {queue} itself, "
            f"whatever their catalogue (a plangate before catalogue queues): "
            f"{', '.join(sorted(set(found.unannounced)))}"
        )
    kinds = {c.digest for c in by} | {mine.digest}
    if len(kinds) > 1 or found.unannounced:
        lines.append(
            f"mixed workers on task queue {queue}: {len(kinds)} catalogues; a run goes only "
            "to workers whose catalogue has every tool and probe it names"
        )
    return lines


WORKER = Command(
    "worker", help="run a worker against the configured services",
    description="Run a worker against the configured services, after checking that Temporal, "
                "Postgres and S3 answer; --check only checks.",
    run=_worker, arguments=_worker_arguments,
)


async def _setup(args: argparse.Namespace, settings: Settings) -> int:
    import psycopg

    from plangate.activities.bootstrap import OWN_SCHEMA, ensure_schema
    from plangate.activities.extensions import registry_for
    from plangate.cli.services import check_postgres, postgres_address
    from plangate.world.clients import World

    schemas = [OWN_SCHEMA, *registry_for(settings.catalogue).schemas]  # cannot load: exit 2
    await check_postgres(settings.world)
    world = World(settings.world)
    try:
        await ensure_schema(world, settings.catalogue)
    except psycopg.errors.InsufficientPrivilege as e:
        first = str(e).strip().splitlines()[0]
        print(f"plangate: setup: this role may not create plangate's tables ({first}): run it "
              "as the role that is to own them", file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    finally:
        await world.close()
    print(f"plangate: tables ready in {postgres_address(settings.world.database_url)} "
          f"(schemas {', '.join(schemas)})")
    return EXIT_OK


SETUP = Command(
    "setup", help="create plangate's tables (and its extensions') as the database role "
    "configured, then exit",
    description="Create plangate's tables (and its extensions') as the configured database "
                "role, then exit.",
    run=_setup,
)
