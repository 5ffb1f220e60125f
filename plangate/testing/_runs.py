"""Run helpers: the real worker assembly on a task queue of its own (``running_worker``), a
plan run to its end (``Harness``), and readings of what a run left: the Temporal history (what
was scheduled, how often it was attempted) and a worker's Prometheus endpoint."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.worker import Interceptor

from plangate.activities.bootstrap import ensure_schema
from plangate.activities.catalogue import announced
from plangate.client.api import Plangate
from plangate.client.reports import ended_report
from plangate.records.interface import INDEX_ACTIVITY, WINDOWS_ACTIVITY
from plangate.records.placement import catalogue_queue
from plangate.records.report import RunReport
from plangate.worker.assembly import build_worker
from plangate.worker.compression import opened
from plangate.workflows.plan_run import PlanRunWorkflow
from plangate.world.clients import World
from plangate.world.settings import Settings


@dataclass
class Harness:
    """Plans run through the Python API on a worker's task queue (``running_worker`` yields
    one): ``run`` to its end, ``start`` and leave, ``run_approving`` answering its cards."""

    client: Client
    settings: Settings

    @property
    def queue(self) -> str:
        """The task queue the worker of ``settings`` polls, its catalogue's (``settings`` names
        the deployment's): where a workflow started by hand, not through the API, goes."""
        digest = announced(self.settings.catalogue).digest
        return catalogue_queue(self.settings.temporal.task_queue, digest)

    async def run(self, plan: dict[str, Any], run_id: str | None = None) -> RunReport:
        handle = await self.start(plan, run_id)
        return await ended(handle)

    async def start(
        self, plan: dict[str, Any], run_id: str | None = None
    ) -> WorkflowHandle[Any, RunReport]:
        return await Plangate(self.client, self.settings).submit(plan, run_id=run_id)

    async def run_approving(
        self, plan: dict[str, Any], by: str = "erin", run_id: str | None = None, *,
        every_s: float = 0.1, after_s: float = 0.0,
    ) -> RunReport:
        """``run``, each card the run waits on approved (signed) by ``by`` as it appears: a
        re-planned money or external step always waits for a person. The report is read every
        ``every_s``, from ``after_s`` on (a benchmark's queries stay out of what it times)."""
        api = Plangate(self.client, self.settings)
        handle = await self.start(plan, run_id)
        await asyncio.sleep(after_s)
        answered: set[str] = set()
        async for rep in api.poll(handle.id, every_s=every_s):
            for a in rep.approvals:
                if a.status == "pending" and a.digest not in answered:
                    answered.add(a.digest)
                    await api.approve(handle.id, a.step, a.digest, by=by)
        return await ended(handle)


async def ended(handle: WorkflowHandle[Any, RunReport]) -> RunReport:
    """The report a run ends with: its result, or (a run that did not succeed fails its
    execution) the details of its failure."""
    try:
        return await handle.result()
    except WorkflowFailureError as e:
        rep = ended_report(e)
        if rep is None:
            raise
        return rep


@asynccontextmanager
async def running_worker(
    client: Client,
    settings: Settings,
    doubles: Mapping[str, Callable[..., Any]] = {},
    world: World | None = None,
    *,
    queue: str | None = None,
    identity: str | None = None,
    door: Interceptor | None = None,
    interceptors: Sequence[Interceptor] = (),
) -> AsyncIterator[Harness]:
    """The real worker assembly (``plangate.worker.assembly.build_worker``) on a fresh task queue
    (or the deployment's ``queue``, with its own ``identity``: a second worker there).
    ``doubles``, by activity name, stand in for the real activities (test doubles, injected
    rather than patched); ``door`` for the worker's door (a benchmark of what it costs);
    ``interceptors`` after it (faults injected at a chosen point). A
    ``world`` given may be one whose services are down: the tables are created through the
    stack's own."""
    queue = queue or f"test-{uuid.uuid4().hex[:8]}"
    s = replace(settings, temporal=replace(settings.temporal, task_queue=queue))
    own = world is None
    if world is not None:
        setup = World(s.world)
        await ensure_schema(setup, s.catalogue)
        await setup.close()
    world = world or World(s.world)
    async with await build_worker(
        client, s, world, doubles=doubles, bootstrap=own, identity=identity, door=door,
        interceptors=interceptors,
    ):
        yield Harness(client, s)
    if own:
        await world.close()


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Scrape:
    """A Prometheus endpoint's text, read once: ``value(name, **labels)`` sums the samples of
    ``name`` whose labels include ``labels``; ``samples(prefix)``, every sample named so."""

    text: str

    def samples(self, prefix: str = "") -> list[tuple[str, dict[str, str], float]]:
        out = []
        for line in self.text.splitlines():
            m = _SAMPLE.match(line)
            if m and m.group(1).startswith(prefix):
                labels = dict(_LABEL.findall(m.group(2) or ""))
                out.append((m.group(1), labels, float(m.group(3))))
        return out

    def value(self, name: str, **labels: str) -> float:
        return sum(
            v for n, have, v in self.samples(name)
            if n == name and all(have.get(k) == want for k, want in labels.items())
        )


async def scrape(address: str) -> Scrape:
    """``GET http://ADDRESS/metrics``."""

    def get() -> str:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as r:
            text: str = r.read().decode()
            return text

    return Scrape(await asyncio.to_thread(get))


def payload_json(p: Payload) -> Any:
    """A history's payload read as JSON, decompressed where the codec compressed it (payloads
    of 256 bytes or more: ``plangate.worker.compression``)."""
    p = opened(p)
    if p.metadata.get("encoding") == b"binary/null":  # None, as the SDK writes it
        return None
    return json.loads(p.data)


def local_activity(e: Any) -> dict[str, Any] | None:
    """A local activity's record (activity_type, attempt) from its marker event, else None."""
    if e.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
        return None
    a = e.marker_recorded_event_attributes
    if a.marker_name != "core_local_activity":
        return None
    data: dict[str, Any] = json.loads(a.details["data"].payloads[0].data)
    return data


async def chain(client: Client, run_id: str) -> list[list[HistoryEvent]]:
    """The history of every run of a plan run's chain (one run, or several when it continued as
    new), first to last: followed back from the latest run."""
    runs: list[list[HistoryEvent]] = []
    execution: str | None = (await client.get_workflow_handle(run_id).describe()).run_id
    while execution:
        handle = client.get_workflow_handle(run_id, run_id=execution)
        events = [e async for e in handle.fetch_history_events()]
        runs.append(events)
        execution = events[0].workflow_execution_started_event_attributes.continued_execution_run_id
    return runs[::-1]


async def history_events(client: Client, run_id: str) -> list[HistoryEvent]:
    """Every event of the run's chain, in order."""
    return [e for run in await chain(client, run_id) for e in run]


_BOOKKEEPING = frozenset({WINDOWS_ACTIVITY, INDEX_ACTIVITY})


async def scheduled(client: Client, run_id: str) -> Counter[str]:
    """Activities run, by type, read from the workflow's history (every run of its chain):
    activity tasks scheduled, and local activities (probes) recorded; but the rows every run
    writes (``windows.record`` as it ends, ``index.record`` as its status changes:
    bookkeeping for ``plangate report`` and the runs index, not something the plan did)."""
    out: Counter[str] = Counter()
    for e in await history_events(client, run_id):
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            out[e.activity_task_scheduled_event_attributes.activity_type.name] += 1
        elif (local := local_activity(e)) is not None and (
                local["activity_type"] not in _BOOKKEEPING):
            out[local["activity_type"]] += 1
    return out


async def attempts(client: Client, run_id: str) -> dict[str, list[int]]:
    """For each activity type, the attempt count of each of its executions, from the history
    (a local activity records its last attempt)."""
    types: dict[int, str] = {}
    out: dict[str, list[int]] = {}
    for e in await history_events(client, run_id):
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            types[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            a = e.activity_task_started_event_attributes
            out.setdefault(types[a.scheduled_event_id], []).append(a.attempt)
        elif (local := local_activity(e)) is not None:
            out.setdefault(local["activity_type"], []).append(int(local["attempt"]))
    return out


async def until_state(handle: WorkflowHandle[Any, RunReport], n: int, state: str) -> None:
    """Poll the run report until step ``n`` is in ``state`` (10 s at most)."""
    for _ in range(200):
        if (await handle.query(PlanRunWorkflow.report)).step(n).state == state:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"step {n} never reached {state}")
