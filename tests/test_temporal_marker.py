"""Fail closed by choice (plangate.temporal.guarded, require_guard): a marked activity on a
worker without PlangatePlugin is refused, never retried, nothing done; with the plugin it is
admitted and acts once; a stranger's call the door refuses is not admitted by the marker; an
admission is one call's alone (a concurrent call on the same worker, a marked function called
from within another admitted activity: refused). Real Temporal and Postgres."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from credits import activities as team
from temporalio import activity
from temporalio.api.enums.v1 import EventType, RetryState
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker

from plangate.temporal import PlangatePlugin, guarded
from plangate.world.clients import World
from plangate.world.settings import Settings
from tests import marked_team as marked
from tests.attacker import AttackWorkflow, CopiedHeaders, captured, from_workflow, shot, standalone
from tests.temporal_team import team_env

__all__ = ["team_env"]

WHOLE = ["refund", "refund_sync", "refund_required"]  # the three ways to mark


async def team_client(settings: Settings) -> Client:
    await team.ensure_schema()
    return await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace,
                                data_converter=pydantic_data_converter)


def worker(client: Client, queue: str, *plugins: PlangatePlugin) -> Worker:
    return Worker(client, task_queue=queue, workflows=[marked.RefundWorkflow],
                  activities=marked.MARKED, activity_executor=ThreadPoolExecutor(2),
                  plugins=list(plugins))


def guard(settings: Settings) -> PlangatePlugin:
    return PlangatePlugin(marked.GUARDS, settings=settings, principal="support-agent")


async def credits(pg: psycopg.AsyncConnection[Any], account: str) -> list[tuple[Any, ...]]:
    """The team's rows for ``account``: credit id, call key, amount in cents."""
    cur = await pg.execute("SELECT credit_id, call_key, amount_cents FROM team.credits "
                           "WHERE account_id = %s", (account,))
    return await cur.fetchall()


async def effects(pg: psycopg.AsyncConnection[Any], wf: str) -> list[tuple[Any, ...]]:
    cur = await pg.execute("SELECT tool, state, idempotency_key FROM plangate.effects "
                           "WHERE run_id = %s", (wf,))
    return await cur.fetchall()


async def attempts(client: Client, wf: str) -> list[tuple[int, int]]:
    """Each activity's last attempt, and how its last failure ended (0: it did not fail)."""
    said: list[tuple[int, int]] = []
    failed: dict[int, int] = {}
    async for e in client.get_workflow_handle(wf).fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            said.append((e.event_id, e.activity_task_started_event_attributes.attempt))
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            a = e.activity_task_failed_event_attributes
            failed[a.started_event_id] = a.retry_state
    return [(n, failed.get(eid, 0)) for eid, n in said]


async def refused(client: Client, queue: str, name: str,
                  account: str) -> tuple[str, ApplicationError]:
    wf = f"marked-{uuid.uuid4().hex[:8]}"
    with pytest.raises(WorkflowFailureError) as caught:
        await client.execute_workflow(
            marked.RefundWorkflow.run, args=[name, account, 4550], id=wf, task_queue=queue,
            execution_timeout=timedelta(seconds=60))
    cause: BaseException | None = caught.value.cause
    if isinstance(cause, ActivityError):  # unguarded: the activity's own refusal
        cause = cause.cause
    # guarded: plangate's refusal (``GuardRefused``, an ApplicationError of the code)
    assert isinstance(cause, ApplicationError), cause
    return wf, cause


@pytest.mark.asyncio(loop_scope="session")
async def test_a_marked_activity_on_a_worker_without_the_plugin_is_refused_once_nothing_done(
    settings: Settings, team_env: None, pg: psycopg.AsyncConnection[Any], world: World,
) -> None:
    client = await team_client(settings)
    queue = f"marked-bare-{uuid.uuid4().hex[:8]}"
    async with worker(client, queue):
        for name in WHOLE:
            account = f"acct-{uuid.uuid4().hex[:8]}"
            wf, err = await refused(client, queue, name, account)
            assert err.type == "guard_missing" and err.non_retryable
            assert err.message == (
                f"{name}: not run: it runs only for a call plangate's guard admitted, and no "
                f"guard admitted this one: register PlangatePlugin on this worker, its guard "
                f"table naming {name}")
            assert err.details and err.details[0]["status"] == 403
            # nothing of the body ran, nothing in the world; one attempt, not retried
            assert marked.REFUNDS[account] == 0
            assert await credits(pg, account) == []
            assert await effects(pg, wf) == []
            assert await attempts(client, wf) == [(1, RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE)]
    # called as a plain function, outside any activity: refused too
    with pytest.raises(ApplicationError, match=r"refund: not run: .* this is no activity"):
        await marked.refund("acct-direct", 1)
    assert marked.REFUNDS["acct-direct"] == 0


def test_the_marker_over_activity_defn_is_refused_naming_the_order() -> None:
    async def refund(account_id: str) -> None: ...

    with pytest.raises(TypeError, match=r"refund is already an activity.*put @guarded under "
                                        r"@activity.defn"):
        guarded(activity.defn(refund))


@pytest.mark.asyncio(loop_scope="session")
async def test_with_the_plugin_a_marked_activity_acts_once_and_a_stranger_is_still_refused(
    settings: Settings, team_env: None, pg: psycopg.AsyncConnection[Any],
) -> None:
    client = await team_client(settings)
    queue = f"marked-guarded-{uuid.uuid4().hex[:8]}"
    runs: dict[str, str] = {}
    async with worker(client, queue, guard(settings)):
        for name in WHOLE:
            account = f"acct-{uuid.uuid4().hex[:8]}"
            wf = runs[name] = f"marked-{uuid.uuid4().hex[:8]}"
            credit_id = await client.execute_workflow(
                marked.RefundWorkflow.run, args=[name, account, 4550], id=wf, task_queue=queue,
                execution_timeout=timedelta(seconds=60))
            assert marked.REFUNDS[account] == 1
            (credit,) = await credits(pg, account)
            assert credit[0] == credit_id and credit[2] == -4550
            assert await effects(pg, wf) == [(name, "done", credit[1])]
            assert await attempts(client, wf) == [(1, 0)]

        # a stranger with the admitted call's own header: standalone, and from a workflow of
        # its own under the admitted run's id: the door refuses, the marker admits neither
        before = dict(marked.REFUNDS)
        victim = (await captured(client, runs["refund"])).call("refund")
        outcome = await standalone(client, "refund", victim.args, queue=queue,
                                   activity_id=f"{runs['refund']}-again", headers=victim.headers)
        assert outcome.refused("outside a workflow"), outcome.said()
        stranger = f"stranger-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=stranger, workflows=[AttackWorkflow],
                          interceptors=[CopiedHeaders()]):
            (shot_at,) = await from_workflow(client, stranger, runs["refund"], [
                shot("refund", victim.args, queue, victim.headers)])
        assert shot_at.refused("seal"), shot_at.said()
        assert dict(marked.REFUNDS) == before
        assert len(await credits(pg, victim.args[0])) == 1


@pytest.mark.asyncio(loop_scope="session")
async def test_an_admission_is_one_calls_alone(
    settings: Settings, team_env: None, pg: psycopg.AsyncConnection[Any],
) -> None:
    client = await team_client(settings)
    queue = f"marked-one-{uuid.uuid4().hex[:8]}"
    held = f"acct-{uuid.uuid4().hex[:8]}"
    entered, released = marked.HELD[held] = (asyncio.Event(), asyncio.Event())
    async with worker(client, queue, guard(settings)):
        admitted = await client.start_workflow(
            marked.RefundWorkflow.run, args=["refund", held, 100], id=f"held-{held}",
            task_queue=queue, execution_timeout=timedelta(seconds=60))
        await asyncio.wait_for(entered.wait(), 30)  # admitted, inside its body, on this worker
        # at the same time, on the same worker: a marked activity no guard table names (the
        # guard passes it untouched), and the marked refund called from within another
        # admitted activity
        other = f"acct-{uuid.uuid4().hex[:8]}"
        _, err = await refused(client, queue, "refund_unlisted", other)
        assert err.type == "guard_missing" and "no guard admitted this one" in err.message
        _, err = await refused(client, queue, "goodwill", other)
        assert err.type == "guard_missing"
        assert "refund: not run: activity goodwill runs it (calls it from within" in err.message
        assert marked.REFUNDS[other] == 0
        assert await credits(pg, other) == []
        released.set()
        credit_id = await admitted.result()
    (credit,) = await credits(pg, held)
    assert credit[0] == credit_id and marked.REFUNDS[held] == 1
