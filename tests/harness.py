"""plangate's own test helpers, beside the public ones in :mod:`plangate.testing`: the session's
approvers, doubles of plangate's internals (the guard activity, a writer moving the world before
a call), readings of what a step's activities carried, and the seeds' incident account."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from plangate.activities.guarding import derive, resolve
from plangate.demo.schema import ACCT_3319F, Account, seed_account
from plangate.records.calls import ToolCall, ToolResult
from plangate.records.interface import GUARD_ACTIVITY
from plangate.records.run import GuardRequest, Resolved
from plangate.records.signing import SigningKey
from plangate.testing import Harness, local_activity, payload_json, running_worker
from plangate.world.clients import World
from plangate.world.settings import APPROVER_KEY_VAR, CatalogueSettings, Settings, signing_keys

# the approvers every test worker knows and every test client holds a key of (tests/conftest.py)
APPROVER_NAMES = ("erin", "frank", "bench", "fuzz")
# the session's catalogue: the core tools and the demo systems (tests/conftest.py turns them on)
DEMO_CATALOGUE = CatalogueSettings(demo_systems=True)


def approver_key(name: str) -> SigningKey:
    """The session's key of approver ``name`` (tests/conftest.py put them in the environment)."""
    (key,) = [k for k in signing_keys(os.environ[APPROVER_KEY_VAR], APPROVER_KEY_VAR)
              if k.name == name]
    return key


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


def reads_with_guards(e: Any) -> int:
    """How many first reads the worker made with a run's guards (``guard.resolve``'s marker),
    else 0."""
    record = local_activity(e)
    if record is None or record.get("activity_type") != GUARD_ACTIVITY:
        return 0
    payload = e.marker_recorded_event_attributes.details["result"].payloads[0]
    reads = payload_json(payload).get("reads", {}).values()  # ReadAhead values, answered
    return sum(len(r["report"]["results"]) > 0 for r in reads)


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
    if not payloads:
        return 0
    result = payload_json(payloads[0])
    if not isinstance(result, dict):
        return 0
    return sum(1 for k in ("checked", "after") if result.get(k) is not None)


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
