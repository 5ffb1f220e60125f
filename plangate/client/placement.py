"""Where a run goes: the task queue of a polling worker whose catalogue has every tool and probe
the plan names (``plangate.records.placement``: workers announce their catalogues on the
deployment's queue). ``place`` chooses, or refuses a plan no polling worker can run;
``workers`` lists who announces what, for ``plangate worker --check``.

With nobody announcing (no worker polls yet, or a server that cannot say, such as the
time-skipping test server), a run goes to the queue of the client's own catalogue, the one it
checked the plan against: a worker of that catalogue takes it when it starts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from plangate.errors import RunError
from plangate.records.placement import Announced, announced, catalogue_queue

if TYPE_CHECKING:
    from temporalio.client import Client

    from plangate.plans.model import Plan
    from plangate.world.settings import TemporalSettings


DESCRIBE_TIMEOUT = timedelta(seconds=5)
STALE_AFTER = timedelta(minutes=2)


class NoCapableWorker(RunError, ValueError):
    """Workers poll the deployment's queue, and none has every tool and probe of the plan."""


@dataclass(frozen=True)
class Poller:
    """A worker announcing its catalogue on the deployment's queue."""

    identity: str
    catalogue: Announced


@dataclass(frozen=True)
class Pollers:
    announcing: list[Poller]
    unannounced: list[str]  # identities polling the deployment's queue for runs itself


async def workers(
    client: Client, temporal: TemporalSettings, *, unannounced: bool = True
) -> Pollers:
    """Who polls the deployment's queue: workers announcing their catalogues, and
    (``unannounced``) workers that take runs from the queue itself (a plangate before catalogue
    queues)."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
    from temporalio.service import RPCError

    kinds = [TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY]
    if unannounced:
        kinds.append(TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW)
    found: list[list[str]] = []
    for kind in kinds:
        request = DescribeTaskQueueRequest(
            namespace=temporal.namespace, task_queue=TaskQueue(name=temporal.task_queue),
            task_queue_type=kind,
        )
        try:
            resp = await client.workflow_service.describe_task_queue(
                request, timeout=DESCRIBE_TIMEOUT
            )
        except RPCError:  # a server that cannot say: nobody known
            return Pollers([], [])
        found.append(current(
            [(p.identity, p.last_access_time.ToDatetime(UTC)) for p in resp.pollers]
        ))
    announcing = []
    for identity in found[0]:
        parsed = announced(identity)
        if parsed is not None:
            announcing.append(Poller(parsed[0], parsed[1]))
    return Pollers(announcing, found[1] if unannounced else [])


def current(pollers: list[tuple[str, datetime]]) -> list[str]:
    """The identities of the pollers still polling. Temporal lists a poller for minutes after
    its last poll; a live one polls again at least every minute or so (a long poll's end), so
    one whose last poll is ``STALE_AFTER`` older than the newest has stopped. Measured against
    the newest rather than this machine's clock, which may differ from the server's."""
    if not pollers:
        return []
    newest = max(at for _, at in pollers)
    return [who for who, at in pollers if newest - at <= STALE_AFTER]


def needs(plan: Plan) -> tuple[set[str], set[str]]:
    """The tools and probes ``plan`` names."""
    tools = {s.tool for s in plan.steps}
    probes = {c.probe for s in plan.steps for c in (*s.pre, *s.post)}
    return tools, probes


def choose(plan: Plan, own: Announced, deployment_queue: str, pollers: list[Poller]) -> str:
    """The queue for a run of ``plan``: with nobody announcing, the one of the client's own
    catalogue ``own``; else of a capable catalogue, the client's own first, then the one with
    the most workers. ``NoCapableWorker`` (one line) when none is capable."""
    if not pollers:
        return catalogue_queue(deployment_queue, own.digest)
    tools, probes = needs(plan)
    count = Counter(p.catalogue for p in pollers)

    def capable(c: Announced) -> bool:
        # a catalogue announced by its digest alone is known only when it is the client's own
        return c.digest == own.digest or c.lacks(tools, probes) == []

    able = sorted((c for c in count if capable(c)),
                  key=lambda c: (c.digest != own.digest, -count[c], c.digest))
    if able:
        return catalogue_queue(deployment_queue, able[0].digest)
    why = []
    for c, n in sorted(count.items(), key=lambda x: x[0].digest):
        lacking = c.lacks(tools, probes)
        what = (f"lacks {', '.join(lacking)}" if lacking
                else "announces no names and is not this client's catalogue")
        why.append(f"catalogue {c.digest} ({n} worker{'s' if n != 1 else ''}) {what}")
    raise NoCapableWorker(
        f"no worker polling task queue {deployment_queue} can run this plan: {'; '.join(why)}"
    )
