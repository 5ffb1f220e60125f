"""The one worker assembly: every plangate workflow and activity and the pydantic data
converter, as a Temporal plugin (``PlangateWorkerPlugin``). ``plangate worker``, ``plangate dev``,
``plangate demo``, the tests and the benchmarks all build their workers with ``build_worker``;
a client connects with ``plangate.client.connection.connect``; a replayer takes the plugin with
no activities. The assembly is where the whole ``Settings`` is taken apart: each activity gets
the parts it decides from, the world its ``WorldSettings``.

A worker polls the task queue of its catalogue (``plangate@3f9c1a2b``: the deployment's queue
and a digest of its tools' and probes' names) and announces that catalogue on the deployment's
queue (``CatalogueAnnouncement``), so that a run goes only to workers that have every tool and
probe it names (``plangate.records.placement``; docs/deployment.md).

The data converter is the deployment's (``plangate.worker.encryption.data_converter``): large
payloads compressed, every payload encrypted when ``PLANGATE_ENCRYPTION_KEYS`` names keys. A
worker uses its client's converter, so ``build_worker`` refuses a client that would not encrypt
with the deployment's key, and with keys gives the worker that client's connection with the
converter that also refuses every payload that is not encrypted: a plain start, signal or
update from anyone who reaches Temporal does not act.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import activity
from temporalio.client import Client
from temporalio.plugin import SimplePlugin
from temporalio.worker import Interceptor, Worker

from plangate.activities.bootstrap import ensure_schema
from plangate.activities.call_checks import as_application_error
from plangate.activities.catalogue import announced, catalogue
from plangate.activities.extensions import ExtensionError, Registry, registry_for
from plangate.activities.grant_cover import GrantActivities
from plangate.activities.guarding import GuardActivities
from plangate.activities.policing import PolicyBook
from plangate.activities.probe_activity import ProbeActivities
from plangate.activities.reading import ReadActivities
from plangate.activities.run_index import IndexActivities
from plangate.activities.tool_activity import tool_activities
from plangate.activities.windows import WindowsActivities
from plangate.records.interface import (
    APPROVERS_ACTIVITY,
    CATALOGUE_ACTIVITY,
    DECIDE_ACTIVITY,
    GRANT_COVER_ACTIVITY,
    GUARD_ACTIVITY,
    INDEX_ACTIVITY,
    PROBE_ACTIVITY,
    PROPOSE_ACTIVITY,
    READ_CALL_ACTIVITY,
    REVIEW_ACTIVITY,
    WINDOWS_ACTIVITY,
)
from plangate.records.placement import announcement, catalogue_queue
from plangate.replanner.activity import ReplanActivities
from plangate.replanner.review import ReviewActivities
from plangate.replanner.workflow import ReplanWorkflow
from plangate.worker import tracing
from plangate.worker.compression import DATA_CONVERTER, WORKER_COMPRESS_FROM
from plangate.worker.door import Door, ensure, keep_trying
from plangate.worker.encryption import data_converter, encrypts_with
from plangate.worker.sandbox import passing_plangate
from plangate.workflows.plan_run import PlanRunWorkflow
from plangate.workflows.sealing import SealKey
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.keys import seal_key
from plangate.world.policies import load_bundle
from plangate.world.settings import EncryptionSettings, Settings

log = logging.getLogger(__name__)

WORKFLOWS: list[type] = [PlanRunWorkflow, ReplanWorkflow]
MAX_CONCURRENT_ACTIVITIES = 32
# A tool heartbeats every second; the SDK sends at most one a throttle interval, and a cancel
# reaches a running tool only with a heartbeat's answer: 2 s, not the default 24-30 s.
HEARTBEAT_THROTTLE = timedelta(seconds=2)


def activities(world: World, settings: Settings) -> dict[str, Callable[..., Any]]:
    """Every plangate activity on ``world``, by the name workflows call it by: each handed the
    parts of ``settings`` it decides from (the catalogue, the policy, the model)."""
    cat, policy = settings.catalogue, settings.policy
    # one view of the policies in force, read again when a file changes, for every decider
    book = PolicyBook(policy, world.settings.scope, catalogue(cat))
    guards = GuardActivities(world, cat, policy, settings.runs, book)
    return {
        PROBE_ACTIVITY: ProbeActivities(world, cat).evaluate,
        GUARD_ACTIVITY: guards.resolve,
        APPROVERS_ACTIVITY: guards.approvers,
        DECIDE_ACTIVITY: guards.decide,
        **tool_activities(world, cat, policy, book),
        PROPOSE_ACTIVITY: ReplanActivities(settings.model, cat).propose,
        REVIEW_ACTIVITY: ReviewActivities(cat, world.settings, policy, book).review,
        WINDOWS_ACTIVITY: WindowsActivities(world, settings.temporal.task_queue).record,
        INDEX_ACTIVITY: IndexActivities(world, settings.temporal.task_queue).record,
        GRANT_COVER_ACTIVITY: GrantActivities(world, cat, policy).cover,
        # a read over MCP answered without a run (plangate mcp's fast path)
        READ_CALL_ACTIVITY: ReadActivities(world, cat, policy, settings.runs, book).read_call,
    }


class PlangateWorkerPlugin(SimplePlugin):
    """plangate on a Temporal client, worker or replayer: its workflows, and a worker's
    ``activities`` (``activities(world, settings)``, with any test doubles in place of ours),
    behind the door (``worker.door``): its workflows seal the calls they schedule with
    ``seal_key`` (a replayer needs none), its activities refuse a call they cannot place.

    The data converter (which a client and a replayer take; a worker uses its client's) is the
    one of ``encryption``; with none, compression alone
    (``plangate.worker.compression.DATA_CONVERTER``: a replayer of histories recorded
    unencrypted)."""

    def __init__(
        self,
        encryption: EncryptionSettings | None = None,
        *,
        activities: Mapping[str, Callable[..., Any]] | None = None,
        seal_key: SealKey | None = None,
        door: Interceptor | None = None,
    ) -> None:
        super().__init__(
            "plangate",
            data_converter=DATA_CONVERTER if encryption is None else data_converter(encryption),
            workflows=WORKFLOWS,
            activities=None if activities is None else list(activities.values()),
            workflow_runner=passing_plangate,
            interceptors=[door or Door(seal_key or SealKey())],
            run_context=None if seal_key is None else functools.partial(_keeping, seal_key),
        )


@asynccontextmanager
async def _keeping(key: SealKey) -> AsyncIterator[None]:
    """While the worker runs, its seal key read until it is (Postgres was down at its start)."""
    if key.value is not None:
        yield
        return
    task = asyncio.create_task(keep_trying(key))
    try:
        yield
    finally:
        task.cancel()


class CatalogueNames(BaseModel):
    """A worker's catalogue: its digest, and the names of its tools and probes."""

    digest: str
    tools: list[str]
    probes: list[str]


class CatalogueAnnouncement(SimplePlugin):
    """While the worker runs, a poller on the deployment's queue whose identity announces the
    worker's catalogue (``records.placement.announcement``), for clients to read with
    DescribeTaskQueue. It polls activity tasks only, so it never takes a run; nothing plangate
    does schedules its one activity, which refuses every call (the identity is the message)."""

    def __init__(self, client: Client, queue: str, identity: str, names: CatalogueNames) -> None:
        @activity.defn(name=CATALOGUE_ACTIVITY)
        async def catalogue() -> CatalogueNames:
            # the poller exists for its identity; nothing of plangate's calls it, so nobody may
            wf = activity.info().workflow_id
            where = ("started outside a workflow (a standalone activity)" if wf is None
                     else f"scheduled by workflow {wf!r}")
            raise as_application_error(ToolError(
                "not_permitted", f"{CATALOGUE_ACTIVITY}: not called: {where}; it announces the "
                "worker's catalogue by its poller's identity and is never scheduled"))

        # made here, not when the worker runs: a poller the SDK refuses (a second worker on
        # this queue and client) fails the build, as the worker's own would
        self.poller = Worker(
            client, task_queue=queue, activities=[catalogue], identity=identity,
            max_concurrent_activities=1, max_concurrent_activity_task_polls=1,
        )

        @asynccontextmanager
        async def announcing() -> AsyncIterator[None]:
            async with self.poller:
                yield

        super().__init__("plangate-catalogue", run_context=announcing)


def worker_client(client: Client, encryption: EncryptionSettings) -> Client:
    """``client``'s connection, namespace and interceptors with the worker's converter: what it
    writes into its runs' histories compressed from 256 bytes
    (``compression.WORKER_COMPRESS_FROM``), and, where ``encryption`` names keys, unencrypted
    payloads refused: the client a worker polls with. Its plugins are left out: their
    converter is the one replaced (their effect on the rest of the configuration is kept)."""
    config = client.config(active_config=True)
    config["data_converter"] = data_converter(
        encryption, refuse_plain=bool(encryption.keys), compress_from=WORKER_COMPRESS_FROM)
    config["plugins"] = []
    return Client(**config)


def policy_check(settings: Settings) -> str:
    """The deployment's policy bundle loaded and validated, as a worker does before it opens a
    connection: a line saying what is in force. ``PoliciesUnusable`` (``PolicyFileError``:
    each problem at ``FILE:LINE:COLUMN``) when ``PLANGATE_POLICIES`` cannot be used."""
    policy = settings.policy
    b = load_bundle(policy, settings.world.scope, catalogue(settings.catalogue))
    where = (f"{len(b.policies)} policies, {policy.policies}" if policy.policies
             else "built-in policies only; PLANGATE_POLICIES unset")
    return f"policy bundle {b.bundle} ({where}; {b.mode})"


async def start_checks(registry: Registry, world: World) -> list[str]:
    """What a worker checks at start, connected, before it takes work (the MCP servers it
    guards list what their file declares: ``registry.checks``); ``plangate worker --check``
    makes the same checks. What each found, a line each; ``ExtensionError`` naming the check
    when the world does not offer what the deployment declares."""
    lines: list[str] = []
    for what, check in registry.checks.items():
        try:
            lines += await check(world) or ()
        except ExtensionError:
            raise
        except Exception as e:  # the world does not offer what the deployment declares
            raise ExtensionError(f"{what}: {e}") from e
    return lines


async def build_worker(
    client: Client,
    settings: Settings,
    world: World | None = None,
    *,
    doubles: Mapping[str, Callable[..., Any]] = {},
    bootstrap: bool = True,
    identity: str | None = None,
    door: Interceptor | None = None,
    interceptors: Sequence[Interceptor] = (),
) -> Worker:
    """A worker on the task queue of its catalogue (``catalogue_queue`` of
    ``settings.temporal.task_queue``), announcing it there: its work directory made and
    (``bootstrap``) plangate's tables created through ``world`` (made from ``settings.world``
    when not given); ``doubles`` (by activity name) stand in for ours: test doubles, injected,
    not patched; ``door`` stands in for the door (``worker.door.Door``): a benchmark of what it
    costs; ``interceptors`` go on the worker after the door (a test's faults at a chosen point).
    ``client`` must encrypt with the deployment's key when ``settings`` names keys
    (``connect`` makes such a client); the worker then polls with ``worker_client(client)``.

    The deployment's tools and probes are resolved first, then its policies: an extension that
    cannot load or that clashes (``ExtensionError``), or a policy file that does not validate
    (``PolicyFileError``), stops the worker before it opens a connection. A world
    made here is closed again when the worker cannot be built: an open connection pool left
    behind would keep the process from ending."""
    registry = registry_for(settings.catalogue)
    log.info("%s", policy_check(settings))  # a bad policy file stops it here, named
    encryption = settings.encryption
    if not encrypts_with(client.data_converter, encryption):
        # the worker would write the deployment's runs in clear
        raise ValueError(
            f"the worker's Temporal client does not encrypt with key "
            f"{encryption.key_ids[0]!r} of PLANGATE_ENCRYPTION_KEYS: connect it with "
            "plangate.client.connection.connect"
        )
    client = worker_client(client, encryption)
    own = world is None
    world = world or World(settings.world)
    world.tracer = tracing.tracer(settings.observability)
    try:
        world.workdir.mkdir(parents=True, exist_ok=True)
        if bootstrap:
            await ensure_schema(world, settings.catalogue)
        for line in await start_checks(registry, world):
            log.info("%s", line)
        acts = {**activities(world, settings), **doubles}
        key = SealKey(source=functools.partial(seal_key, world))
        if await ensure(key) is None:
            log.warning("the worker starts without the call seal's key (the deployment's "
                        "Postgres does not answer): it schedules no tool call until it has it")
        mine = announced(settings.catalogue)
        names = CatalogueNames(
            digest=mine.digest, tools=sorted(registry.tools), probes=sorted(registry.probes)
        )
        deployment_queue = settings.temporal.task_queue
        ours = announcement(identity or client.identity, mine)
        return Worker(
            client,
            task_queue=catalogue_queue(deployment_queue, mine.digest),
            plugins=[
                PlangateWorkerPlugin(encryption, activities=acts, seal_key=key, door=door),
                CatalogueAnnouncement(client, deployment_queue, ours, names),
            ],
            max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
            max_cached_workflows=settings.temporal.max_cached_runs,
            max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            identity=identity,
            interceptors=list(interceptors),
        )
    except BaseException:
        if own:
            await world.close()
        raise
