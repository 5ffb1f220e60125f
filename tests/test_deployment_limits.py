"""The deployment's limits on a run are the worker's (issue 34): a raw start whose input asks
for an outage patience of 10^9 s and a history bound of 10^12 events gets the worker's, 0 s
and 300 events here. Judged by the run: its chain continued as new within the worker's bound
(each run's history counted), the next run's input carries the worker's limits, and a step
whose system does not answer halts at once instead of waiting. A plan that asks for a card
valid 7 days gets the deployment's 24 hours."""

from __future__ import annotations

import asyncio
import socket
import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType

from plangate.client.api import Plangate
from plangate.plans.load import parse_plan
from plangate.records.report import RunReport
from plangate.records.run import HistoryBound, RunInput
from plangate.testing import chain, ended, running_worker, scheduled
from plangate.workflows.plan_run import PlanRunWorkflow
from plangate.world.clients import World

EVENTS = 300  # the worker's bound (PLANGATE_HISTORY_EVENTS)
STEPS = 40  # more than one run of 300 events holds


def job_step(n: int, job: str) -> dict[str, Any]:
    return {"n": n, "tool": "warehouse.run_sql", "depends_on": [n - 1] if n > 1 else [],
            "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
            "post": [{"probe": "job_state", "job_id": job, "want": "done"}]}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens here once the socket closes


async def test_a_raw_start_gets_the_deployments_patience_and_history_bound(
    client, settings, pg
):
    tag = f"limits-{uuid.uuid4().hex[:8]}"
    steps = [job_step(n, f"{tag}-{n}") for n in range(1, STEPS + 1)]
    # last, a read of an S3 that does not answer: with the input's patience it would wait
    # for 10^9 s; with the worker's (none) it halts
    steps.append({"n": STEPS + 1, "tool": "s3.get", "effect": "read", "depends_on": [STEPS],
                  "args": {"bucket": "vendor-drops", "key": "k.csv", "dest": f"{tag}/k.csv"}})
    plan = parse_plan({"goal": "jobs, then a read", "budget": {"replans_max": 0},
                       "steps": steps})
    worker = replace(settings, runs=replace(settings.runs, history_events=EVENTS,
                                            outage_patience_s=0.0))
    dead_s3 = World(replace(worker.world, s3_endpoint_url=f"http://127.0.0.1:{closed_port()}"))
    asked = RunInput(plan=plan, outage_patience_s=1e9,
                     history=HistoryBound(events=10**12, bytes=10**12))
    async with running_worker(client, worker, world=dead_s3) as h:
        handle = await client.start_workflow(PlanRunWorkflow.run, asked, id=tag,
                                             task_queue=h.queue)
        # the input's patience would keep the run waiting: a hang, not an answer
        rep: RunReport = await asyncio.wait_for(ended(handle), 120)
    await dead_s3.close()
    # the bound: every run but the last continued as new, none past the worker's bound
    runs = await chain(client, tag)
    assert len(runs) >= 2 and rep.segments == len(runs)
    assert [len(r) <= EVENTS for r in runs] == [True] * len(runs), [len(r) for r in runs]
    ends = [r[-1].event_type for r in runs]
    assert ends[:-1] == [EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW] * (len(runs) - 1)
    # each next run was handed the worker's limits, not the input's
    for r in runs[1:]:
        started = r[0].workflow_execution_started_event_attributes
        (carried,) = await client.data_converter.decode(started.input.payloads, [RunInput])
        assert isinstance(carried, RunInput)
        assert (carried.history.events, carried.outage_patience_s) == (EVENTS, 0.0)
    # every job acted once across the chain
    assert (await scheduled(client, tag))["warehouse.run_sql"] == STEPS
    cur = await pg.execute("SELECT count(*) FROM plangate.jobs WHERE job_id LIKE %s AND "
                           "state = 'done'", (f"{tag}-%",))
    assert (await cur.fetchone())[0] == STEPS
    # the patience: the read halted the run at once, never waiting for S3
    assert rep.status == "halted"
    assert rep.failure is not None and rep.failure.code == "system_unavailable"
    last = rep.step(STEPS + 1)
    assert last.state == "HALTED"
    assert "WAITING" not in [t.state for t in last.transitions]
    assert "patience left" not in last.reason


async def test_a_plan_cannot_make_its_cards_outlive_the_deployments(client, settings, s3):
    bucket = f"ttl-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    plan = {"goal": "publish", "budget": {"replans_max": 0}, "approval_ttl_s": 7 * 86400,
            "steps": [{"n": 1, "tool": "s3.put", "approval": "required",
                       "args": {"bucket": bucket, "key": "k.txt", "body": "figures"}}]}
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(plan)
        for _ in range(300):
            rep = await api.report(run_id)
            if rep.approvals:
                break
            await asyncio.sleep(0.05)
        (card,) = rep.approvals
        await api.cancel(run_id, reason="the card was all this test needed", requester="test")
        rep = await ended(api.handle(run_id))
    # the deployment's 24 h (PLANGATE_APPROVAL_TTL), in the card its digest binds
    assert card.card.expires_at - card.card.issued_at == timedelta(hours=24)
    assert card.expires_at == card.card.expires_at and card.digest == card.card.digest()
    assert settings.policy.approval_ttl_s == 24 * 3600
    assert rep.status == "cancelled" and "Contents" not in s3.list_objects_v2(Bucket=bucket)
