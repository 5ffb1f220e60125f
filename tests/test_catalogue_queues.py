"""A run lands only on workers that know its tools and probes (issue 22): two workers on one
deployment's task queue, one with the tickets extension (``examples/tickets``) and one
without. What ran where is read from the Temporal history (the identity of the worker that
took each workflow task, where probes run, and each activity task); a plan no polling worker
can run is refused by ``plangate run`` in one line, and no workflow starts."""

from __future__ import annotations

import asyncio
import os
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError
from tickets_service import TicketsService

from plangate.client.api import Plangate
from plangate.client.connection import connect
from plangate.client.placement import NoCapableWorker, Poller, choose, current, workers
from plangate.plans.load import parse_plan
from plangate.records.placement import (
    IDENTITY_MAX,
    Announced,
    announced,
    announcement,
    of_deployment,
)
from plangate.testing import history_events, running_worker
from plangate.world.settings import Settings, TemporalSettings
from tests.test_example_tickets import TICKETS, new_ticket, plangate, service, triage_plan

__all__ = ["service"]  # the fixture, shared with test_example_tickets

PLAIN, TICKETED = "plain-worker", "tickets-worker"


def tickets(settings: Settings, queue: str) -> Settings:
    catalogue = replace(settings.catalogue, extensions=("plangate_tickets",))
    return replace(settings, catalogue=catalogue,
                   temporal=replace(settings.temporal, task_queue=queue))


async def announcing(client: Client, temporal: TemporalSettings, n: int) -> None:
    """Until ``n`` workers announce their catalogues on the deployment's queue."""
    for _ in range(200):
        found = await workers(client, temporal)
        if len(found.announcing) >= n:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {n} workers announce on {temporal.task_queue}")


async def who_ran(client: Client, run_id: str) -> tuple[set[str], dict[str, set[str]]]:
    """The identities that took the run's workflow tasks, and those that took each activity."""
    scheduled: dict[int, str] = {}
    tasks: set[str] = set()
    acts: dict[str, set[str]] = {}
    for e in await history_events(client, run_id):
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            tasks.add(e.workflow_task_started_event_attributes.identity)
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            a = e.activity_task_started_event_attributes
            acts.setdefault(scheduled[a.scheduled_event_id], set()).add(a.identity)
    return tasks, acts


async def test_a_run_goes_to_the_worker_with_its_tools_and_check_reports_mixed_workers(
    client, settings, stack, service: TicketsService
):
    queue = f"mixed-{uuid.uuid4().hex[:8]}"
    plain = replace(settings, temporal=replace(settings.temporal, task_queue=queue))
    # a client each, as separate machines have (the SDK allows one worker per queue on one)
    other = await connect(settings)
    async with (
        running_worker(client, plain, queue=queue, identity=PLAIN) as a,
        running_worker(other, tickets(settings, queue), queue=queue, identity=TICKETED) as b,
    ):
        # one deployment queue, a catalogue queue each
        assert a.queue != b.queue
        assert of_deployment(a.queue, queue) and of_deployment(b.queue, queue)
        await announcing(client, plain.temporal, 2)
        api = Plangate(client, b.settings)  # a client that knows the extension, as after install
        # several runs: on one shared queue (before catalogue queues) about half of them went
        # to the plain worker and failed there
        for _ in range(3):
            tid = new_ticket(service)
            run_id = await api.start(triage_plan(tid))
            rep = await api.result(run_id)
            assert rep.status == "succeeded", rep.failure
            assert all(s.state == "DONE" for s in rep.steps)
            # the run, every workflow task (the probes: local activities) and every activity
            # were the tickets worker's; the plain worker took nothing of it
            assert await api.task_queue_of(run_id) == b.queue
            tasks, acts = await who_ran(client, run_id)
            assert tasks == {TICKETED}
            assert acts["tickets.get"] == acts["tickets.update"] == {TICKETED}
            assert service.ticket(tid)["assignee"] == "dana"
        # still listed as the deployment's run, on its catalogue queue
        listed: list[str] = []
        for _ in range(100):
            listed = [r.run_id for r in await api.runs()]
            if run_id in listed:
                break
            await asyncio.sleep(0.1)
        assert run_id in listed

        # plangate worker --check, with the plain worker's catalogue: both catalogues, mixed
        env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": queue}
        code, out, err = await plangate("worker", "--check", env=env)
        assert code == 0, err
        a_digest, b_digest = a.queue.rsplit("@")[1], b.queue.rsplit("@")[1]
        assert f"catalogue {a_digest} (this worker's): 1 worker ({PLAIN})" in out
        assert (f"catalogue {b_digest}: 1 worker ({TICKETED}); has this worker's names and more"
                in out)
        assert f"mixed workers on task queue {queue}: 2 catalogues" in out


async def test_run_refuses_a_plan_no_polling_worker_can_run_in_one_line(
    client, settings, stack, tmp_path
):
    queue = f"lacking-{uuid.uuid4().hex[:8]}"
    plain = replace(settings, temporal=replace(settings.temporal, task_queue=queue))
    run_id = f"refused-{uuid.uuid4().hex[:8]}"
    plan = tmp_path / "triage.json"
    plan.write_text((TICKETS / "triage.json").read_text())
    async with running_worker(client, plain, queue=queue, identity=PLAIN) as a:
        await announcing(client, plain.temporal, 1)
        # the client knows the extension (check passes), the only worker does not
        env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": queue,
               "PLANGATE_EXTENSIONS": "plangate_tickets",
               "PYTHONPATH": os.pathsep.join([str(TICKETS), os.environ.get("PYTHONPATH", "")])}
        code, out, err = await plangate("run", str(plan), "--id", run_id, env=env)
        assert (code, out) == (2, ""), err
        assert err.count("\n") == 1 and err.startswith(
            f"plangate: no worker polling task queue {queue} can run this plan: catalogue "
            f"{a.queue.rsplit('@')[1]} (1 worker) lacks ticket_status, tickets.get, "
            "tickets.update"
        ), err
        # and the queued run too: placed when it is submitted
        code, _, err = await plangate("run", str(plan), "--id", run_id, "--start-in", "1h",
                                      env=env)
        assert code == 2 and "lacks ticket_status" in err
    with pytest.raises(RPCError):
        await client.get_workflow_handle(run_id).describe()  # nothing started


async def test_a_run_started_before_any_worker_polls_waits_for_its_catalogue(
    client, settings, s3
):
    queue = f"early-{uuid.uuid4().hex[:8]}"
    early = replace(settings, temporal=replace(settings.temporal, task_queue=queue))
    api = Plangate(client, early)
    s3.create_bucket(Bucket=queue)
    plan = {"goal": "write before anyone polls", "steps": [
        {"n": 1, "tool": "s3.put", "args": {"bucket": queue, "key": "k", "body": "early"}}]}
    run_id = await api.start(plan)  # nobody polls: the queue of this client's catalogue
    async with running_worker(client, early, queue=queue) as h:
        assert await api.task_queue_of(run_id) == h.queue
        rep = await api.result(run_id)
    assert rep.status == "succeeded", rep.failure
    assert s3.get_object(Bucket=queue, Key="k")["Body"].read() == b"early"


def test_choose_prefers_a_capable_catalogue_and_refuses_without_one():
    plan = parse_plan(triage_plan("T-1"))
    core = Announced.of(["s3.get", "tickets.get"], ["object_exists"])
    full = Announced.of(["s3.get", "tickets.get", "tickets.update"], ["ticket_status"])
    other = Announced.of(["tickets.get", "tickets.update", "x.y"], ["ticket_status"])
    pollers = [Poller("a", core), Poller("b", other), Poller("c", full), Poller("d", other)]
    # the client's own catalogue (which the plan was checked against) first, then the capable
    # one most workers have
    mine = Announced.of(["tickets.get", "tickets.update", "z.z"], ["ticket_status"])
    assert choose(plan, full, "q", pollers) == f"q@{full.digest}"
    assert choose(plan, mine, "q", pollers) == f"q@{other.digest}"
    assert choose(plan, mine, "q", []) == f"q@{mine.digest}"  # nobody announces
    with pytest.raises(NoCapableWorker, match=r"lacks ticket_status, tickets\.update$"):
        choose(plan, full, "q", [Poller("a", core)])
    # a catalogue announced by its digest alone: only the client's own
    digest_only = Announced(full.digest, None)
    assert choose(plan, full, "q", [Poller("a", digest_only)]) == f"q@{full.digest}"
    with pytest.raises(NoCapableWorker, match="announces no names"):
        choose(plan, mine, "q", [Poller("a", digest_only)])


def test_a_poller_whose_last_poll_is_minutes_older_than_the_newest_has_stopped():
    now = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
    listed = [("live", now), ("mid-poll", now - timedelta(seconds=65)),
              ("stopped", now - timedelta(minutes=4))]
    assert current(listed) == ["live", "mid-poll"]
    assert current([("stopped", now - timedelta(minutes=4))]) == ["stopped"]  # nobody newer
    assert current([]) == []


def test_an_announcement_fits_temporals_identity_limit_and_reads_back():
    cat = Announced.of([f"t.{i}" for i in range(40)], [f"p{i}" for i in range(20)])
    ident = announcement("123@host", cat)
    assert len(ident) <= IDENTITY_MAX and announced(ident) == ("123@host", cat)
    huge = Announced.of([f"tool.{i}" for i in range(400)], [])
    ident = announcement("123@host", huge)
    assert len(ident) <= IDENTITY_MAX
    assert announced(ident) == ("123@host", Announced(huge.digest, None))
    assert announced("123@host") is None
    assert of_deployment("q@3f9c1a2b", "q") and of_deployment("q", "q")
    assert not of_deployment("q2@3f9c1a2b", "q") and not of_deployment("q@a@b", "q")
