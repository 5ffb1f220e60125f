"""Helpers for integration tests: an in-process worker on its own task queue, readings of the
Temporal history (what was scheduled, how often it was attempted) and of a worker's Prometheus
endpoint."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import urllib.request
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from plangate.activities.bootstrap import ensure_schema
from plangate.activities.demo_schema import ACCT_3319F, Account, seed_account
from plangate.activities.guarding import ACTIVITY_NAME as GUARD_ACTIVITY
from plangate.activities.guarding import derive, resolve
from plangate.api import Plangate
from plangate.assembly import build_worker
from plangate.records.calls import ToolCall, ToolResult
from plangate.records.report import RunReport
from plangate.records.run import GuardRequest, Resolved
from plangate.records.signing import SigningKey
from plangate.replanner.activity import ReplanActivities
from plangate.replanner.backends.openai import OpenAIBackend
from plangate.workflows.plan_run import PlanRunWorkflow
from plangate.world.clients import World
from plangate.world.settings import (
    APPROVER_KEY_VAR,
    CatalogueSettings,
    ModelSettings,
    Settings,
    signing_keys,
)
from tests.fake_openai import FakeOpenAI

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


# the approvers every test worker knows and every test client holds a key of (tests/conftest.py)
APPROVER_NAMES = ("erin", "frank", "bench", "fuzz")
# the session's catalogue: the core tools and the demo systems (tests/conftest.py turns them on)
DEMO_CATALOGUE = CatalogueSettings(demo_systems=True)


def approver_key(name: str) -> SigningKey:
    """The session's key of approver ``name`` (tests/conftest.py put them in the environment)."""
    (key,) = [k for k in signing_keys(os.environ[APPROVER_KEY_VAR], APPROVER_KEY_VAR)
              if k.name == name]
    return key


@dataclass
class Harness:
    client: Client
    settings: Settings

    async def run(self, plan: dict[str, Any], run_id: str | None = None) -> RunReport:
        handle = await self.start(plan, run_id)
        return await handle.result()

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
        return await handle.result()


@asynccontextmanager
async def running_worker(
    client: Client,
    settings: Settings,
    doubles: Mapping[str, Callable[..., Any]] = {},
    world: World | None = None,
) -> AsyncIterator[Harness]:
    """The real worker assembly (``plangate.assembly.build_worker``) on a fresh task queue.
    ``doubles``, by activity name, stand in for the real activities (test doubles, injected
    rather than patched). A ``world`` given may be one whose services are down: the tables are
    created through the stack's own."""
    queue = f"test-{uuid.uuid4().hex[:8]}"
    s = replace(settings, temporal=replace(settings.temporal, task_queue=queue))
    own = world is None
    if world is not None:
        setup = World(s.world)
        await ensure_schema(setup, s.catalogue)
        await setup.close()
    world = world or World(s.world)
    async with await build_worker(client, s, world, doubles=doubles, bootstrap=own):
        yield Harness(client, s)
    if own:
        await world.close()


def unchecked_guards(settings: Settings) -> Callable[..., Any]:
    """A double of ``guard.resolve``: the guards derived as the worker derives them, but the
    plan not checked, as if the worker's own check had missed what a test puts to a tool's or
    probe's own refusal at run time."""

    @activity.defn(name=GUARD_ACTIVITY)
    async def resolve(req: GuardRequest) -> Resolved:
        return derive(req, settings.catalogue, settings.policy)

    return resolve


def guards_alone(settings: Settings) -> Callable[..., Any]:
    """A double of ``guard.resolve`` that derives and checks, as the worker does, but makes no
    first read: every read goes to the ``probe.evaluate`` activity, for a test whose double of
    that activity is what a step must meet."""

    @activity.defn(name=GUARD_ACTIVITY)
    async def resolve_alone(req: GuardRequest) -> Resolved:
        return resolve(req, settings.catalogue, settings.world, settings.policy)

    return resolve_alone


@asynccontextmanager
async def unchecked_worker(client: Client, settings: Settings) -> AsyncIterator[Harness]:
    """``running_worker`` whose plan check misses everything (``unchecked_guards``)."""
    async with running_worker(client, settings, {GUARD_ACTIVITY: unchecked_guards(settings)}) as h:
        yield h


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


@contextlib.contextmanager
def stack_state(name: str) -> Iterator[Path]:
    """A directory for an embedded stack's state, in the system's temporary directory rather
    than under pytest's ``tmp_path``. Run as root, the stack runs Postgres as an unprivileged
    user, which must traverse every parent of its data directory; pytest makes its own base
    directory (``/tmp/pytest-of-<user>``) private again each time a session starts, so another
    suite starting meanwhile would lock that user out of a stack being set up (``initdb``:
    Permission denied)."""
    path = Path(tempfile.mkdtemp(prefix=f"plangate-{name}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def console_script(name: str) -> str:
    """An installed console script (``plangate``, ``temporal``) next to this Python."""
    script = Path(sys.executable).parent / name
    if not script.is_file():
        raise RuntimeError(f"{name} is not installed next to {sys.executable}")
    return str(script)


def s3_client(env: Mapping[str, str]) -> S3Client:
    """A boto3 S3 client from a stack's environment alone (its endpoint and credentials), never
    from this process's ``AWS_*`` variables."""
    client: S3Client = boto3.client(
        "s3",
        endpoint_url=env["PLANGATE_S3_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_DEFAULT_REGION"],
    )
    return client


def model_backed(settings: Settings, fake: FakeOpenAI) -> ReplanActivities:
    """The real re-planner activity, on the real OpenAI client, against the local fake."""
    model = ModelSettings(
        replanner="openai", name="fake-model", base_url=fake.base_url, api_key="sk-test"
    )
    backend = OpenAIBackend.from_settings(model, settings.catalogue)
    return ReplanActivities(model, settings.catalogue, backend=backend)


def local_activity(e: Any) -> dict[str, Any] | None:
    """A local activity's record (activity_type, attempt) from its marker event, else None."""
    if e.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
        return None
    a = e.marker_recorded_event_attributes
    if a.marker_name != "core_local_activity":
        return None
    data: dict[str, Any] = json.loads(a.details["data"].payloads[0].data)
    return data


def reads_with_guards(e: Any) -> int:
    """How many first reads the worker made with a run's guards (``guard.resolve``'s marker),
    else 0. A compressed result (over the codec's threshold) is not read here: 0."""
    record = local_activity(e)
    if record is None or record.get("activity_type") != "guard.resolve":
        return 0
    payload = e.marker_recorded_event_attributes.details["result"].payloads[0]
    if payload.metadata.get("encoding") != b"json/plain":
        return 0
    return sum(len(r["results"]) > 0 for r in json.loads(payload.data).get("reads", {}).values())


class MovedBeforeCall:
    """The real ``warehouse.run_sql`` activity, with another writer changing the world after
    the workflow's read and before the call: ``move`` runs first, then the real activity."""

    def __init__(self, real: Callable[[ToolCall], Awaitable[ToolResult]],
                 move: Callable[[], Awaitable[None]]) -> None:
        self.real, self.move = real, move
        self.calls = 0

    @activity.defn(name="warehouse.run_sql")
    async def run(self, call: ToolCall) -> ToolResult:
        self.calls += 1
        await self.move()
        return await self.real(call)


def reads_in_call(e: Any) -> int:
    """How many reads of the world a tool's activity made around its call (``ToolResult``'s
    ``checked`` and ``after``), from its completion event, else 0."""
    if e.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        return 0
    payloads = e.activity_task_completed_event_attributes.result.payloads
    if not payloads or payloads[0].metadata.get("encoding") != b"json/plain":
        return 0
    result = json.loads(payloads[0].data)
    if not isinstance(result, dict):
        return 0
    return sum(1 for k in ("checked", "after") if result.get(k) is not None)


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


async def scheduled(client: Client, run_id: str) -> Counter[str]:
    """Activities run, by type, read from the workflow's history (every run of its chain):
    activity tasks scheduled, and local activities (probes) recorded."""
    out: Counter[str] = Counter()
    for e in await history_events(client, run_id):
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            out[e.activity_task_scheduled_event_attributes.activity_type.name] += 1
        elif (local := local_activity(e)) is not None:
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


async def incident_account(world: World) -> Account:
    """Seed 001's account as the incident found it (archived overnight, still active, one draft
    invoice of EUR 612.40, one active subscription), under ids of its own: a test's close-out
    never meets another test's rows."""
    tag = uuid.uuid4().hex[:8]
    account = replace(
        ACCT_3319F,
        account_id=f"acct_{tag}",
        invoices=tuple((f"in_{tag}", amount, state) for _, amount, state in ACCT_3319F.invoices),
        subscriptions=tuple((f"sub_{tag}", state) for _, state in ACCT_3319F.subscriptions),
    )
    await seed_account(world, account)
    return account


def polling_plan(job: str, replans_max: int = 0, interval_s: int = 60) -> dict[str, Any]:
    """Request a job, then wait up to an hour (a read a minute, or every ``interval_s``) for it
    to be done; then a second step."""
    return {"goal": "re-export and load", "budget": {"replans_max": replans_max}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "requested"}},
         "post": [{"probe": "job_state", "job_id": job, "want": "done",
                   "wait": {"timeout_s": 3600, "interval_s": interval_s}}]},
        {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
         "args": {"statement": "select_one"}},
    ]}


async def until_state(handle: WorkflowHandle[Any, RunReport], n: int, state: str) -> None:
    """Poll the run report until step ``n`` is in ``state`` (10 s at most)."""
    for _ in range(200):
        if (await handle.query(PlanRunWorkflow.report)).step(n).state == state:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"step {n} never reached {state}")
