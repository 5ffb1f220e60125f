"""A read over MCP that nobody else can answer (issue 46): anyone who reaches the namespace can
start ``plangate.read_call`` under any id, or poll the catalogue's queue and answer it. The
front starts each read under an id of its own nobody can guess, never attaches to an activity
that exists, takes an answer only where it names this very call (the tool, its arguments, the
read's id), and waits for no activity past its own limit; whatever it does not take, a run
answers. Judged against the real Temporal dev server (standalone activities on) and S3."""

from __future__ import annotations

import hashlib
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import ActivityExecutionStatus, Client
from temporalio.worker import Worker

from plangate.activities.catalogue import announced
from plangate.client.api import Plangate
from plangate.client.checked import Checked, check
from plangate.client.reading import (
    ReadMisanswered,
    ReadNotAnswered,
    read_bound,
    read_call,
    read_id,
)
from plangate.mcp.access import Access
from plangate.mcp.clients import McpClient, StartLimit
from plangate.mcp.guarded import GuardedCall
from plangate.mcp.reads import FastReads
from plangate.plans.model import Plan
from plangate.records.interface import READ_CALL_ACTIVITY
from plangate.records.placement import catalogue_queue
from plangate.records.reading import Asked, ReadAnswer, ReadCall
from plangate.testing import running_worker
from plangate.world.settings import Settings
from tests.mcp_client import REQUEST_ID, http_server, server_env

TAKE_WITHIN = timedelta(seconds=2)
MARGIN_S = 10.0  # far below the 90 s a squatted id held a call before


def get_plan(bucket: str, key: str, dest: str) -> dict[str, Any]:
    return {"goal": "s3.get called over MCP", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": bucket, "key": key, "dest": dest}}]}


def two_objects(s3: Any) -> str:
    """A bucket with this call's object (``k``) and another's (``other``)."""
    bucket = f"ids-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"hello")
    s3.put_object(Bucket=bucket, Key="other", Body=b"another invoice")
    return bucket


def worker_queue(s: Settings) -> str:
    """The queue the worker's standalone activities are taken from (as the front finds it)."""
    return catalogue_queue(s.temporal.task_queue, announced(s.catalogue).digest)


async def status(client: Client, activity_id: str) -> ActivityExecutionStatus:
    return (await client.get_activity_handle(activity_id).describe()).status


class OnQueue(FastReads):
    """The front's reads, sent to ``queue`` (where the attacker's worker is, or nobody)."""

    def __init__(self, access: Access, take_within_s: float, queue: str) -> None:
        super().__init__(access, take_within_s)
        self.to = queue

    async def queue(self, api: Plangate, done: Checked) -> str:
        return self.to


async def downloaded(pg: Any, run_id: str) -> list[tuple[str, str]]:
    """What a read wrote on the worker, by its ledger rows (its directory is gone)."""
    cur = await pg.execute("SELECT output->>'path', output->>'sha256' FROM plangate.effects "
                           "WHERE run_id = %s AND effect = 'local_write'", (run_id,))
    return [(str(p), str(d)) for p, d in await cur.fetchall()]


async def test_an_activity_started_first_under_the_id_a_call_had_does_not_answer_it(
    client: Client, settings: Settings, stack: Any, s3: Any, pg: Any
) -> None:
    """The attacker starts ``plangate.read_call`` under the id the front derived before (the
    client, the request id, the tool and the arguments): on a queue nobody polls (it would have
    held the call 90 s), and on the worker's own queue, reading another object (its genuine
    answer would have been this call's). Each call is answered with its own data, at once,
    under an id of its own; the attacker's activities are left as they were."""
    bucket = two_objects(s3)
    async with running_worker(client, settings) as h:
        squats = [(f"nobody-{uuid.uuid4().hex[:8]}", "squat"), (worker_queue(h.settings), "taken")]
        env = server_env(stack, settings, h.settings.temporal.task_queue)
        async with http_server(env) as srv, srv.client() as mcp:
            for queue, what in squats:
                dest = f"{what}-{uuid.uuid4().hex[:8]}.txt"
                args = {"bucket": bucket, "key": "k", "dest": dest}
                rid = f"req-{uuid.uuid4().hex[:8]}"
                before = GuardedCall.of("s3.get", args, {REQUEST_ID: rid}).run_id("token")
                forged = ReadCall.model_validate(
                    {"plan": get_plan(bucket, "other", f"forged-{dest}")})
                squat = await client.start_activity(
                    READ_CALL_ACTIVITY, forged, id=before, task_queue=queue,
                    result_type=ReadAnswer, schedule_to_close_timeout=timedelta(seconds=90))
                if what == "taken":  # the worker's genuine read of the other object
                    got = await squat.result()
                    assert got.report is not None and got.report.steps[0].result is not None
                    assert got.report.steps[0].result["size"] == len(b"another invoice")
                meta: Any = {REQUEST_ID: rid}
                res = await mcp.session.call_tool("s3_get", args, meta=meta)
                out = res.structured_content
                assert not res.is_error and out is not None, res
                assert (out["status"], out["tool"]) == ("succeeded", "s3.get")
                assert out["result"]["size"] == len(b"hello")  # its own object
                (path, digest), = await downloaded(pg, out["run_id"])
                assert path.endswith(dest) and digest == hashlib.sha256(b"hello").hexdigest()
                assert out["run_id"] != before and out["run_id"].startswith("mcp-s3.get-read-")
                expected = (ActivityExecutionStatus.RUNNING if what == "squat"
                            else ActivityExecutionStatus.COMPLETED)
                assert await status(client, before) == expected
                if what == "squat":
                    await squat.terminate(reason="the test's squat")


async def test_an_id_that_is_taken_is_never_attached_to(
    client: Client, settings: Settings, s3: Any
) -> None:
    """Were a read's id taken all the same (started first on a queue nobody polls), the read
    is not attached to that activity: it is not answered (a run answers), at once, and the
    activity is left as it was."""
    bucket = two_objects(s3)
    async with running_worker(client, settings) as h:
        done = check(get_plan(bucket, "k", f"clash-{uuid.uuid4().hex[:8]}.txt"), h.settings)
        call_id = read_id("s3.get")
        squat = await client.start_activity(
            READ_CALL_ACTIVITY, ReadCall(plan=done.plan), id=call_id,
            task_queue=f"nobody-{uuid.uuid4().hex[:8]}", result_type=ReadAnswer,
            schedule_to_close_timeout=timedelta(seconds=90))
        t0 = time.monotonic()
        with pytest.raises(ReadNotAnswered) as clash:
            await read_call(client, h.settings, done, call_id, take_within=TAKE_WITHIN,
                            queue=worker_queue(h.settings))
        took = time.monotonic() - t0
    assert str(clash.value) == f"the read's activity id {call_id!r} is taken"
    assert took < TAKE_WITHIN.total_seconds() + MARGIN_S
    assert await status(client, call_id) == ActivityExecutionStatus.RUNNING
    await squat.terminate(reason="the test's squat")


async def test_ids_are_new_for_every_read_and_unguessable() -> None:
    ids = {read_id("s3.get") for _ in range(1000)}
    assert len(ids) == 1000
    assert all(i.startswith("mcp-s3.get-read-") and len(i) == len("mcp-s3.get-read-") + 32
               for i in ids)


def asked_of(call_id: str, bucket: str, key: str, dest: str) -> Asked:
    found = Asked.of(call_id, Plan.model_validate(get_plan(bucket, key, dest)))
    assert found is not None
    return found


def test_an_answer_is_taken_only_for_the_call_it_names() -> None:
    plan = Plan.model_validate(get_plan("b", "k", "d.txt"))
    mine = asked_of("mcp-s3.get-read-1", "b", "k", "d.txt")
    report = {"run_id": "mcp-s3.get-read-1", "status": "succeeded",
              "submitted_at": "2026-12-07T00:00:00Z", "goal": "g",
              "steps": [{"n": 1, "tool": "s3.get", "plan_version": 1, "effect": "read",
                         "state": "DONE", "timings": {"plan_made_at": "2026-12-07T00:00:00Z"}}]}
    answer = ReadAnswer.model_validate({"report": report, "asked": mine.model_dump()})
    assert answer.refusal("mcp-s3.get-read-1", plan) is None
    assert ReadAnswer(run="a run must").refusal("mcp-s3.get-read-1", plan) is None
    other = asked_of("mcp-s3.get-read-2", "b", "other", "d.txt")
    assert answer.model_copy(update={"asked": other}).refusal("mcp-s3.get-read-1", plan) == (
        f"it answers s3.get (arguments {other.args_sha256[:12]}) under 'mcp-s3.get-read-2', "
        f"not s3.get (arguments {mine.args_sha256[:12]}) under 'mcp-s3.get-read-1'")
    assert answer.model_copy(update={"asked": None}).refusal(
        "mcp-s3.get-read-1", plan) == "it names no call"
    # the report of another read, under this call's name
    rep = answer.report
    assert rep is not None
    moved = answer.model_copy(update={"report": rep.model_copy(update={"run_id": "x"})})
    assert moved.refusal("mcp-s3.get-read-1", plan) == (
        "its report is of 'x' (s3.get), not of 'mcp-s3.get-read-1' (s3.get)")


async def test_an_answer_that_names_another_call_is_never_returned(
    client: Client, settings: Settings, s3: Any, pg: Any
) -> None:
    """The attacker polls a read's queue and answers it: with the worker's genuine answer to
    another read (another object, another id), or with an answer that names no call. The
    front takes neither (a run answers the call); the reason is said."""
    bucket = two_objects(s3)
    async with running_worker(client, settings) as h:
        # a genuine answer of the worker's: the other object read under its own id
        captured_id = read_id("s3.get")
        other = check(get_plan(bucket, "other", f"o-{uuid.uuid4().hex[:8]}.txt"), h.settings)
        captured = await read_call(client, h.settings, other, captured_id,
                                   take_within=timedelta(seconds=10),
                                   queue=worker_queue(h.settings))
        assert captured.report is not None and captured.asked is not None
        nameless = captured.model_copy(update={"asked": None})
        answers = [captured, nameless, captured]

        @activity.defn(name=READ_CALL_ACTIVITY)
        async def forge(req: ReadCall) -> ReadAnswer:
            return answers.pop(0)

        queue = f"attacker-{uuid.uuid4().hex[:8]}"
        dest = f"mine-{uuid.uuid4().hex[:8]}.txt"
        done = check(get_plan(bucket, "k", dest), h.settings)
        want = Asked.of("", done.plan)
        assert want is not None
        async with Worker(client, task_queue=queue, activities=[forge]):
            call_id = read_id("s3.get")
            with pytest.raises(ReadMisanswered) as wrong:
                await read_call(client, h.settings, done, call_id, take_within=TAKE_WITHIN,
                                queue=queue)
            assert str(wrong.value) == (
                "the read's activity answered another call: it answers s3.get (arguments "
                f"{captured.asked.args_sha256[:12]}) under {captured_id!r}, not s3.get "
                f"(arguments {want.args_sha256[:12]}) under {call_id!r}")
            with pytest.raises(ReadMisanswered) as unnamed:
                await read_call(client, h.settings, done, read_id("s3.get"),
                                take_within=TAKE_WITHIN, queue=queue)
            assert str(unnamed.value) == (
                "the read's activity answered another call: it names no call")
            # the front: no report taken, so the call goes to a run
            front = OnQueue(Access(h.settings, StartLimit(0)), TAKE_WITHIN.total_seconds(),
                            queue)
            assert await front.answer(McpClient("attacked"), done) is None
        assert answers == []  # each forged answer was asked for, and none was taken
    # nobody read for this call: no file written anywhere under its name
    cur = await pg.execute("SELECT count(*) FROM plangate.effects WHERE effect = 'local_write' "
                           "AND output->>'path' LIKE %s", (f"%{dest}",))
    assert await cur.fetchone() == (0,)


async def test_a_read_nobody_takes_is_given_up_within_the_fronts_limit(
    client: Client, settings: Settings, s3: Any
) -> None:
    """A queue nobody polls: the read is not answered within the front's own limit (taken
    within ``take_within`` or not at all), and the front says a run must answer."""
    bucket = two_objects(s3)
    async with running_worker(client, settings) as h:
        done = check(get_plan(bucket, "k", f"late-{uuid.uuid4().hex[:8]}.txt"), h.settings)
        nobody = f"nobody-{uuid.uuid4().hex[:8]}"
        call_id = read_id("s3.get")
        t0 = time.monotonic()
        with pytest.raises(ReadNotAnswered) as late:
            await read_call(client, h.settings, done, call_id, take_within=TAKE_WITHIN,
                            queue=nobody)
        took = time.monotonic() - t0
        assert str(late.value).startswith("the read's activity did not answer: ")
        assert took < TAKE_WITHIN.total_seconds() + MARGIN_S
        assert await status(client, call_id) == ActivityExecutionStatus.TIMED_OUT
        front = OnQueue(Access(h.settings, StartLimit(0)), TAKE_WITHIN.total_seconds(), nobody)
        t0 = time.monotonic()
        assert await front.answer(McpClient("waiting"), done) is None
        assert time.monotonic() - t0 < TAKE_WITHIN.total_seconds() + MARGIN_S
    assert read_bound(TAKE_WITHIN) < timedelta(seconds=90)
