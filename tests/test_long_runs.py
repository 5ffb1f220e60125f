"""Long runs: a plan run continues as new before its history grows past its bound, carrying
the report, bindings, verified states, the waits in progress and the cards waiting for a person;
every step acts once across the chain of runs.

A bound of 300 events here (the default is 10,240) makes a few dozen steps or reads span several
runs. Waits run on the time-skipping test server; the world they read is real Postgres and S3.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType

from plangate.client.api import Plangate
from plangate.testing import chain, local_activity, running_worker, scheduled
from tests.harness import reads_in_call, reads_with_guards

EVENTS = 300  # the history bound of these tests (PLANGATE_HISTORY_EVENTS)


def job_step(n: int, job: str, **extra: Any) -> dict[str, Any]:
    return {"n": n, "tool": "warehouse.run_sql",
            "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
            "post": [{"probe": "job_state", "job_id": job, "want": "done"}], **extra}


def assert_within_bound(runs: list[list[Any]]) -> None:
    """Every run but the last ended by continuing as new, and none holds more events than the
    bound."""
    assert [len(r) <= EVENTS for r in runs] == [True] * len(runs), [len(r) for r in runs]
    ends = [r[-1].event_type for r in runs]
    assert ends[:-1] == [EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW] * (len(runs) - 1)
    assert ends[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED


async def test_a_long_plan_continues_as_new_and_every_step_acts_once(client, settings, pg):
    tag = f"long-{uuid.uuid4().hex[:8]}"
    n = 60
    steps = [job_step(i, f"{tag}-{i}", **({"depends_on": [i - 1]} if i > 1 else {}))
             for i in range(1, n + 1)]
    # a binding made in the first run, used in the last
    steps[0]["binds"] = {"rows": "$.rowcount"}
    steps[-1] = job_step(n, f"{tag}-last-${{rows}}", depends_on=[n - 1])
    plan = {"goal": "sixty jobs in a row", "budget": {"replans_max": 0}, "steps": steps}
    bounded = replace(settings, runs=replace(settings.runs, history_events=EVENTS))
    async with running_worker(client, bounded) as h:
        rep = await h.run(plan)
    assert rep.status == "succeeded", rep.failure
    runs = await chain(client, rep.run_id)
    assert len(runs) >= 3 and rep.segments == len(runs)
    assert_within_bound(runs)
    # each step's call was made once, across the chain, each under its own key
    assert (await scheduled(client, rep.run_id))["warehouse.run_sql"] == n
    keys = [
        e.activity_task_scheduled_event_attributes.input.payloads[0].data
        for r in runs for e in r
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert len(set(keys)) == n
    cur = await pg.execute(
        "SELECT job_id FROM plangate.jobs WHERE job_id LIKE %s AND state = 'done'", (f"{tag}-%",)
    )
    done = {row[0] for row in await cur.fetchall()}
    assert done == {f"{tag}-{i}" for i in range(1, n)} | {f"{tag}-last-1"}
    # the report is whole: every step, in order, done once, verified, with its checks
    assert [(s.n, s.state) for s in rep.steps] == [(i, "DONE") for i in range(1, n + 1)]
    assert [c.n for c in rep.completed] == list(range(1, n + 1))
    assert rep.step(1).binds == {"rows": 1}
    for s in rep.steps:
        assert [t.state for t in s.transitions][-2:] == ["VERIFYING", "DONE"]
        assert [c.results[0].outcome for c in s.checks if c.phase == "post"] == ["holds"]
    # the windows' samples were carried across runs: every step that read before its call
    # (step 1 binds a value, so it is never skipped, and has nothing to read first)
    assert rep.metrics.check_to_use_ms.count == n - 1


async def test_a_day_long_wait_and_a_card_carry_across_runs(
    own_time_skipping_env, settings, s3, pg
):
    """A wait of up to 24 hours read every 10 s beside a write that waits for a person: the
    card is issued in the first run and approved in a later one; the wait's reads go on on
    their schedule, run after run, until the world catches up two hours in (``bench.long_run``
    waits the whole day)."""
    env = own_time_skipping_env
    tag = uuid.uuid4().hex[:8]
    job, bucket = f"day-{tag}", f"carry-{tag}"
    s3.create_bucket(Bucket=bucket)
    plan = {"goal": "wait for the export, publish the figures", "budget": {"replans_max": 0},
            "steps": [
                {"n": 1, "tool": "warehouse.run_sql",
                 "args": {"statement": "set_job_state",
                          "params": {"job_id": job, "state": "requested"}},
                 "post": [{"probe": "job_state", "job_id": job, "want": "done",
                           "wait": {"timeout_s": 86400, "interval_s": 10}}]},
                {"n": 2, "tool": "s3.put", "approval": "required",
                 "args": {"bucket": bucket, "key": "figures.txt", "body": "final figures"}},
                {"n": 3, "tool": "warehouse.run_sql", "depends_on": [1, 2],
                 "args": {"statement": "select_one"}},
            ]}
    bounded = replace(settings, runs=replace(settings.runs, history_events=EVENTS))
    async with running_worker(env.client, bounded) as h:
        api = Plangate(env.client, h.settings)
        handle = await h.start(plan)
        await env.sleep(timedelta(minutes=30))  # 180 reads: several runs
        rep = await api.report(handle.id)
        (card,) = rep.approvals
        assert card.status == "pending" and rep.segments >= 2  # issued in an earlier run
        assert (await scheduled(env.client, handle.id)).get("s3.put", 0) == 0
        await api.approve(handle.id, 2, card.digest, by="erin", at=await env.get_current_time())
        for _ in range(3):  # in steps: one long skip would outlast the test server's RPC
            await env.sleep(timedelta(minutes=30))
        assert (await api.report(handle.id)).step(1).state in ("WAITING", "VERIFYING")
        await pg.execute("UPDATE plangate.jobs SET state = 'done' WHERE job_id = %s", (job,))
        rep = await asyncio.wait_for(handle.result(), 120)
    assert rep.status == "succeeded", rep.failure
    runs = await chain(env.client, rep.run_id)
    assert rep.segments == len(runs) and len(runs) >= 4
    assert_within_bound(runs)
    calls = await scheduled(env.client, rep.run_id)
    assert calls["s3.put"] == 1 and calls["warehouse.run_sql"] == 2
    assert s3.get_object(Bucket=bucket, Key="figures.txt")["Body"].read() == b"final figures"
    (card,) = rep.approvals
    assert card.status == "approved" and card.answer is not None and card.answer.by == "erin"
    # every read the chain made is in the report: the wait's first and latest read, counted
    waited = rep.step(1)
    posts = [c for c in waited.checks if c.phase == "post"]
    reads = sum(c.reads for c in posts)
    assert [c.results[0].outcome for c in posts] == ["violated", "holds"]
    # one read each 10 s for the two hours skipped; the wait begins once step 1's call has
    # run, in real time the server does not skip (a minute at most under load): bounds, not
    # a count (a loaded CI saw 719)
    assert 2 * 360 - 6 <= reads <= 2 * 360 + 2
    probes = sum(
        1 for r in runs for e in r
        if (la := local_activity(e)) is not None and la["activity_type"] == "probe.evaluate"
    )
    in_calls = sum(reads_in_call(e) for r in runs for e in r)  # made in the tools' activities
    assert in_calls >= 2  # each call read its pre conditions before and its post check after
    first = sum(reads_with_guards(e) for r in runs for e in r)  # with the guards, at the start
    assert first == 2  # the two steps that start first
    assert probes + in_calls + first == sum(c.reads for s in rep.steps for c in s.checks)
    assert waited.state == "DONE" and rep.step(3).state == "DONE"
