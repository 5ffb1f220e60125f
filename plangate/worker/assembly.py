"""The one worker assembly: every plangate workflow and activity and the pydantic data
converter, as a Temporal plugin (``PlangatePlugin``). ``plangate worker``, ``plangate dev``,
``plangate demo``, the tests and the benchmarks all build their workers with ``build_worker``;
a client connects with ``plangate.client.connection.connect``; a replayer takes the plugin with no
world.

The data converter is the deployment's (``plangate.worker.encryption.data_converter``): large
payloads compressed, every payload encrypted when ``PLANGATE_ENCRYPTION_KEYS`` names keys. A
worker uses its client's converter, so ``build_worker`` refuses a client that would not encrypt
with the deployment's key, and with keys gives the worker that client's connection with the
converter that also refuses every payload that is not encrypted: a plain start, signal or
update from anyone who reaches Temporal does not act.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker

from plangate.activities.bootstrap import ensure_schema
from plangate.activities.extensions import registry_for
from plangate.activities.guarding import ACTIVITY_NAME as GUARD_ACTIVITY
from plangate.activities.guarding import GuardActivities
from plangate.activities.probe_activity import PROBE_ACTIVITY, ProbeActivities
from plangate.activities.tool_activity import tool_activities
from plangate.replanner.activity import ACTIVITY_NAME as PROPOSE_ACTIVITY
from plangate.replanner.activity import ReplanActivities
from plangate.replanner.review import ACTIVITY_NAME as REVIEW_ACTIVITY
from plangate.replanner.review import ReviewActivities
from plangate.replanner.workflow import ReplanWorkflow
from plangate.worker import tracing
from plangate.worker.compression import DATA_CONVERTER
from plangate.worker.encryption import data_converter, encrypts_with
from plangate.workflows.plan_run import PlanRunWorkflow
from plangate.world.clients import World
from plangate.world.settings import Settings

WORKFLOWS: list[type] = [PlanRunWorkflow, ReplanWorkflow]
MAX_CONCURRENT_ACTIVITIES = 32
# A tool heartbeats every second; the SDK sends at most one a throttle interval, and a cancel
# reaches a running tool only with a heartbeat's answer: 2 s, not the default 24-30 s.
HEARTBEAT_THROTTLE = timedelta(seconds=2)


def activities(world: World) -> dict[str, Callable[..., Any]]:
    """Every plangate activity on ``world``, by the name workflows call it by."""
    return {
        PROBE_ACTIVITY: ProbeActivities(world).evaluate,
        GUARD_ACTIVITY: GuardActivities(world).resolve,
        **tool_activities(world),
        PROPOSE_ACTIVITY: ReplanActivities(world.settings).propose,
        REVIEW_ACTIVITY: ReviewActivities(world.settings).review,
    }


class PlangatePlugin(SimplePlugin):
    """plangate on a Temporal client, worker or replayer. With a ``world``, its activities too;
    ``doubles`` (by activity name) stand in for ours: test doubles, injected, not patched.

    The data converter (which a client and a replayer take; a worker uses its client's) is the
    one of ``settings``, else of the world's settings; with neither, compression alone
    (``plangate.worker.compression.DATA_CONVERTER``: a replayer of histories recorded
    unencrypted)."""

    def __init__(
        self,
        world: World | None = None,
        *,
        doubles: Mapping[str, Callable[..., Any]] = {},
        settings: Settings | None = None,
    ) -> None:
        acts: list[Callable[..., Any]] | None = None
        if world is not None:
            acts = list({**activities(world), **doubles}.values())
        settings = settings or (world.settings if world is not None else None)
        super().__init__(
            "plangate",
            data_converter=DATA_CONVERTER if settings is None else data_converter(settings),
            workflows=WORKFLOWS,
            activities=acts,
        )


def refusing_plain(client: Client, settings: Settings) -> Client:
    """``client``'s connection, namespace and interceptors with the deployment's converter that
    refuses unencrypted payloads (``settings`` names keys): the client a worker polls with.
    Its plugins are left out: their converter is the one replaced (their effect on the rest of
    the configuration is kept)."""
    config = client.config(active_config=True)
    config["data_converter"] = data_converter(settings, refuse_plain=True)
    config["plugins"] = []
    return Client(**config)


async def build_worker(
    client: Client,
    settings: Settings,
    world: World | None = None,
    *,
    doubles: Mapping[str, Callable[..., Any]] = {},
    bootstrap: bool = True,
    identity: str | None = None,
) -> Worker:
    """A worker on ``settings.task_queue``: its work directory made and (``bootstrap``)
    plangate's tables created through ``world``. ``client`` must encrypt with the deployment's
    key when ``settings`` names keys (``connect`` makes such a client); the worker then polls
    with ``refusing_plain(client)``.

    The deployment's tools and probes are resolved first: an extension that cannot load or
    that clashes (``ExtensionError``) stops the worker before it opens a connection. A world
    made here is closed again when the worker cannot be built: an open connection pool left
    behind would keep the process from ending."""
    registry_for(settings)
    if not encrypts_with(client.data_converter, settings):
        # the worker would write the deployment's runs in clear
        raise ValueError(
            f"the worker's Temporal client does not encrypt with key "
            f"{settings.encryption_key_ids[0]!r} of PLANGATE_ENCRYPTION_KEYS: connect it with "
            "plangate.client.connection.connect"
        )
    if settings.encryption_keys:
        client = refusing_plain(client, settings)
    own = world is None
    world = world or World(settings)
    world.tracer = tracing.tracer(settings)
    try:
        settings.workdir.mkdir(parents=True, exist_ok=True)
        if bootstrap:
            await ensure_schema(world)
        return Worker(
            client,
            task_queue=settings.task_queue,
            plugins=[PlangatePlugin(world, doubles=doubles)],
            max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
            max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            identity=identity,
        )
    except BaseException:
        if own:
            await world.close()
        raise
