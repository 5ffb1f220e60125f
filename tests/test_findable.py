"""Runs findable in Temporal's visibility: plangate's search attributes kept current by the
run (``PlangateStatus``, ``PlangateGoal``, ``PlangateAwaitingApproval``), found by the real
``temporal`` CLI and by ``plangate runs``; one-line summaries on what a run schedules; a
server without the attributes runs plans all the same, upserting none."""

from __future__ import annotations

import asyncio
import io
import json
import re
import shlex
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rich.console import Console
from temporalio.api.enums.v1 import EventType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client

from plangate.cli import main
from plangate.client.api import Plangate, SearchAttributesMissing
from plangate.client.view import render
from plangate.dev._stack import _temporal as dev
from plangate.dev._stack import choose_port
from plangate.testing import console_script, running_worker, until_state
from tests.harness import polling_plan

E = EventType
GIVE_UP_S = 15  # visibility is eventually consistent: a change shows within a second or so


def publish(bucket: str, key: str) -> dict[str, Any]:
    return {"goal": f"publish the report {key}", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "approval": "required",
         "args": {"bucket": bucket, "key": key, "body": "final figures"}},
    ]}


async def settled(what: str, read: Callable[[], Awaitable[set[str]]], want: set[str]) -> set[str]:
    """What ``read`` finds once it finds ``want`` twice in a row (or, after ``GIVE_UP_S``, what
    it found last)."""
    found: set[str] = set()
    agreed = 0
    for _ in range(int(GIVE_UP_S / 0.2)):
        found = await read()
        agreed = agreed + 1 if found == want else 0
        if agreed == 2:
            break
        await asyncio.sleep(0.2)
    return found


async def temporal_list(address: str, query: str) -> set[str]:
    """The workflow ids the real ``temporal`` CLI lists for ``query``."""
    proc = await asyncio.create_subprocess_exec(
        console_script("temporal"), "workflow", "list", "--address", address,
        "--namespace", "default", "--query", query, "-o", "json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    text = out.decode().strip()
    rows = json.loads(text) if text.startswith("[") else [
        json.loads(line) for line in text.splitlines() if line.strip()
    ]
    return {row["execution"]["workflowId"] for row in rows}


async def cli_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Any:
    assert await asyncio.to_thread(main, argv) == 0
    return json.loads(capsys.readouterr().out)


async def plangate_status(client: Any, run_id: str) -> list[str]:
    """The PlangateStatus values the run upserted, in order, from its history."""
    out = []
    async for e in client.get_workflow_handle(run_id).fetch_history_events():
        if e.event_type == E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            fields = e.upsert_workflow_search_attributes_event_attributes.search_attributes
            if "PlangateStatus" in fields.indexed_fields:
                out.append(json.loads(fields.indexed_fields["PlangateStatus"].data))
    return out


async def summaries(client: Any, run_id: str) -> list[str]:
    """The summary of every activity scheduled and local activity recorded, in order."""
    out = []
    async for e in client.get_workflow_handle(run_id).fetch_history_events():
        kind = e.event_type in (E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, E.EVENT_TYPE_MARKER_RECORDED)
        if kind and e.user_metadata.HasField("summary"):
            out.append(json.loads(e.user_metadata.summary.data))
    return out


async def test_the_runs_awaiting_approval_are_found(client, settings, stack, s3, pg,
                                                    monkeypatch, capsys):
    bucket, job = f"find-{uuid.uuid4().hex[:8]}", f"find-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    address = stack.temporal_address
    async with running_worker(client, settings) as h:
        for k, v in {**stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue}.items():
            monkeypatch.setenv(k, v)
        api = Plangate(client, h.settings)
        assert await api.search_attributes_registered()  # the embedded dev server's
        approved, cancelled = [await api.start(publish(bucket, f"{i}.txt")) for i in range(2)]
        waiting = {approved, cancelled}
        other = await api.start(polling_plan(job, interval_s=1))  # its post condition waits
        await until_state(api.handle(other), 1, "WAITING")
        for run_id in waiting:
            await until_state(api.handle(run_id), 1, "AWAITING_APPROVAL")

        # the Temporal CLI finds exactly the runs waiting (of this test's task queue: other
        # tests share the server), and the bare query finds them and not the one running
        mine = f'TaskQueue="{h.queue}"'
        query = f'PlangateStatus="awaiting_approval" AND {mine}'
        assert await settled("awaiting", lambda: temporal_list(address, query), waiting) == waiting
        bare = await temporal_list(address, 'PlangateStatus="awaiting_approval"')
        assert waiting <= bare and other not in bare
        assert await temporal_list(address, f"PlangateAwaitingApproval=true AND {mine}") == waiting
        assert await temporal_list(address, f'PlangateStatus="running" AND {mine}') == {other}

        # plangate runs prints the same (the configured task queue's runs)
        listed = await cli_json(capsys, ["runs", "--status", "awaiting_approval", "--json"])
        assert {r["run_id"] for r in listed} == waiting
        assert {r["goal"] for r in listed} == {"publish the report 0.txt",
                                               "publish the report 1.txt"}
        assert all(r["status"] == "awaiting_approval" and r["started_at"] for r in listed)
        assert await asyncio.to_thread(main, ["runs", "--status", "awaiting_approval"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert sorted(line.split()[0] for line in lines) == sorted(waiting)
        assert all(" awaiting_approval " in line and "publish the report" in line
                   for line in lines)
        everyone = await cli_json(capsys, ["runs", "--json"])
        assert {r["run_id"] for r in everyone} == waiting | {other}

        # the live view shows the card with the command that answers it; that command works
        screen = io.StringIO()
        Console(file=screen, width=220, force_terminal=False).print(
            render(await api.report(approved), datetime.now(UTC))
        )
        (command,) = re.findall(r"plangate approve \S+ --step 1 --digest [0-9a-f]{64}",
                                screen.getvalue())
        card = (await api.report(approved)).approvals[0]
        assert command == f"plangate approve {approved} --step 1 --digest {card.digest}"
        assert await asyncio.to_thread(main, shlex.split(command)[1:]) == 0
        assert await asyncio.to_thread(main, ["cancel", cancelled, "--reason", "not today"]) == 0
        capsys.readouterr()
        await pg.execute("UPDATE plangate.jobs SET state = 'done' WHERE job_id = %s", (job,))
        for run_id in (approved, cancelled, other):
            await api.result(run_id)

        # kept current: nobody waits any more, and each run is found by how it ended
        assert await settled("none waiting", lambda: temporal_list(address, query), set()) == set()

        async def ended(status: str) -> set[str]:
            listed = await cli_json(capsys, ["runs", "--status", status, "--json"])
            return {r["run_id"] for r in listed}

        assert await settled("cancelled", lambda: ended("cancelled"), {cancelled}) == {cancelled}
        assert await ended("succeeded") == {approved, other}

        # a run queued for later is found queued; cancelled before it began (terminated: no
        # code of the run ran to say so), it is found cancelled by its execution status
        later = await api.start(publish(bucket, "later.txt"), start_in=timedelta(hours=1))
        assert await settled("queued", lambda: ended("queued"), {later}) == {later}
        await api.cancel(later, reason="not tonight")
        both = {cancelled, later}
        assert await settled("cancelled", lambda: ended("cancelled"), both) == both

    # set "running" at the start by the client, then upserted by the run as it changed
    assert await plangate_status(client, approved) == ["awaiting_approval", "running",
                                                       "succeeded"]
    assert await plangate_status(client, cancelled) == ["awaiting_approval", "cancelled"]
    # summaries: the workflow's own, and one on every activity and probe it scheduled
    desc = await client.get_workflow_handle(approved).describe()
    assert await desc.static_summary() == "publish the report 0.txt · plan v1, 1 step"
    assert f"1. `s3.put` s3://{bucket}/0.txt" in (await desc.static_details() or "")
    target = f"s3://{bucket}/0.txt"
    assert await summaries(client, approved) == [
        "guards of plan v1, 1 step + pre-check step 1",
        # where the approval is recorded, the worker names its approvers now (issue 34)
        "who may answer the card of step 1 now",
        f"re-probe step 1: object_content_equals {target}, object_version {target}",
        f"step 1 s3.put -> {target}",  # its post check is read in its own activity
    ]


async def test_a_server_without_the_attributes_runs_plans_all_the_same(time_skipping_env,
                                                                       settings):
    env = time_skipping_env
    plan = {"goal": "ask the warehouse", "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "effect": "read",
         "args": {"statement": "select_one"}},
    ]}
    async with running_worker(env.client, settings) as h:
        api = Plangate(env.client, h.settings)
        assert not await api.search_attributes_registered()  # it cannot say: not registered
        rep = await api.result(await api.start(plan))
        with pytest.raises(SearchAttributesMissing, match="PlangateStatus"):
            await api.runs(rep.status)
    assert rep.status == "succeeded"
    assert await plangate_status(env.client, rep.run_id) == []  # no upsert was even tried


async def test_a_dev_server_state_from_before_gets_the_attributes(state_dir, monkeypatch):
    """``start-dev --search-attribute`` registers them only in a new database: a ``plangate
    dev`` state directory from before they existed gets them when its server starts."""
    def server() -> dev.TemporalDevServer:
        return dev.TemporalDevServer(
            port=choose_port("Temporal", None, fallback=True), ui_port=None,
            db_file=state_dir / "temporal.db", log_file=state_dir / "temporal.log",
            namespace="default",
        )

    async def names(s: dev.TemporalDevServer) -> set[str]:
        c = await Client.connect(s.address)
        have = await c.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace="default")
        )
        return {n for n in have.custom_attributes if n.startswith("Plangate")}

    original = dev.TemporalDevServer.command

    def without_attributes(self: dev.TemporalDevServer) -> list[str]:
        cmd = original(self)
        flags = [i for i, a in enumerate(cmd) if a == "--search-attribute"]
        return [a for i, a in enumerate(cmd) if i not in flags and i - 1 not in flags]

    before = server()
    with monkeypatch.context() as m:  # the server as plangate dev started it before
        m.setattr(dev.TemporalDevServer, "command", without_attributes)
        m.setattr(dev, "register_search_attributes", _nothing)
        await before.start()
    try:
        assert await names(before) == set()
    finally:
        await asyncio.to_thread(before.stop)
    now = server()
    await now.start()
    try:
        assert await names(now) == {"PlangateStatus", "PlangateGoal", "PlangateAwaitingApproval"}
    finally:
        await asyncio.to_thread(now.stop)


async def _nothing(*_: Any) -> list[str]:
    return []


async def test_plangate_runs_lists_the_newest_first(client, settings, stack, s3, monkeypatch,
                                                    capsys):
    """A run waiting for a card (open), then a run that ends at once: ``plangate runs`` shows
    the one submitted last first, though the server lists open runs before closed ones."""
    bucket = f"newest-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    async with running_worker(client, settings) as h:
        for k, v in {**stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue}.items():
            monkeypatch.setenv(k, v)
        api = Plangate(client, h.settings)
        older = await api.start(publish(bucket, "older.txt"))
        await until_state(api.handle(older), 1, "AWAITING_APPROVAL")
        newer = (await h.run({"goal": "at once", "steps": [
            {"n": 1, "tool": "warehouse.run_sql", "args": {"statement": "select_one"}}]})).run_id
        listed = await cli_json(capsys, ["runs", "--json"])
        assert [r["run_id"] for r in listed] == [newer, older], listed
        assert await asyncio.to_thread(main, ["runs"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert [line.split()[0] for line in lines] == [newer, older]
        assert await asyncio.to_thread(main, ["cancel", older, "--reason", "done here"]) == 0
        capsys.readouterr()
