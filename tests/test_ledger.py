"""The effect ledger (``plangate.effects``): plangate's own record of what it did, so no effect
happens twice whatever resets, retries or re-dispatches, with tools that do not dedupe (an
extension tool, ``tests.ledger_tools``, and a back-door MCP server's tool, ``tests/ledger_server``)
against the real Temporal, Postgres and MCP server."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from pydantic import JsonValue
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

import tests.ledger_tools  # noqa: F401 (declares the tools TOOLS holds)
from plangate.activities.probe_activity import ProbeActivities
from plangate.activities.tool_activity import _make, tool_activities
from plangate.activities.tools.mcp.sessions import IDEMPOTENCY_META
from plangate.activities.tools.registry import TOOLS, CallContext
from plangate.client.api import Plangate
from plangate.plans.model import Effect
from plangate.records import keys
from plangate.records.calls import StepRef, ToolCall, ToolFailure
from plangate.records.report import RunReport
from plangate.testing import ended, running_worker
from plangate.world.clients import World
from plangate.world.settings import PolicySettings, Settings
from tests.crash_harness import WorkerProcess
from tests.heartbeat import BEAT_ENV

ROOT = Path(__file__).resolve().parents[1]
EXTENSION = "tests.ledger_tools"


def ledgered(settings: Settings, servers: Path | None = None) -> Settings:
    """The deployment of these tests: the ledger tools, money waiting for a person."""
    catalogue = replace(settings.catalogue, extensions=(EXTENSION,),
                        mcp_servers=str(servers) if servers else None)
    policy = replace(settings.policy, approve_effects=(Effect.MONEY,))
    return replace(settings, catalogue=catalogue, policy=policy)


def servers_file(tmp_path: Path, log: Path) -> Path:
    declared = {"servers": {"payments": {
        "command": [sys.executable, str(ROOT / "tests" / "ledger_server.py"), str(log)],
        "timeout_s": 20,
        "tools": {"payments.pay": {
            "tool": "pay", "effect": "money",
            "args": {"account": "string", "amount_eur": "number"},
        }},
    }}}
    path = tmp_path / "payments.yaml"
    path.write_text(yaml.safe_dump(declared, sort_keys=False))
    return path


def pay_plan(tool: str, account: str, amount: float = 7.25, **extra: Any) -> dict[str, Any]:
    return {"goal": f"pay {account}", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": tool, "approval": "required",
         "args": {"account": account, "amount_eur": amount, **extra}},
    ]}


def account() -> str:
    return f"a_{uuid.uuid4().hex[:10]}"


async def payments(pg: Any, account: str) -> int:
    cur = await pg.execute("SELECT count(*) FROM ledger_test.payments WHERE account = %s",
                           (account,))
    row = await cur.fetchone()
    return int(row[0])


async def rows(pg: Any, run_id: str) -> list[tuple[str, str, str, str | None]]:
    cur = await pg.execute(
        "SELECT idempotency_key, tool, state, approver FROM plangate.effects WHERE run_id = %s",
        (run_id,))
    return list(await cur.fetchall())


async def approve_when_waiting(api: Plangate, run_id: str) -> None:
    for _ in range(1200):  # 60 s: a loaded machine (a second suite beside this one)
        rep = await api.report(run_id)
        pending = [a for a in rep.approvals if a.status == "pending"]
        if pending:
            await api.approve(run_id, pending[0].step, pending[0].digest, by="erin")
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no card of {run_id} waited")


async def events_of(client: Client, run_id: str, run: str) -> list[Any]:
    history = await client.get_workflow_handle(run_id, run_id=run).fetch_history()
    return list(history.events)


async def approval_task(client: Client, run_id: str, run: str) -> int:
    """The workflow task that took the approval: the completion just before the Update was
    accepted."""
    last_completed = 0
    for e in await events_of(client, run_id, run):
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            last_completed = e.event_id
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            return last_completed
    raise AssertionError(f"{run_id}: no Update accepted")


async def reset_to(client: Client, run_id: str, run: str, event_id: int) -> str:
    answer = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=run_id, run_id=run),
            reason="the ledger's test: reset to the approval", request_id=str(uuid.uuid4()),
            workflow_task_finish_event_id=event_id,
        ))
    return answer.run_id


async def scheduled_in(client: Client, run_id: str, run: str, tool: str) -> int:
    return sum(
        1 for e in await events_of(client, run_id, run)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == tool
    )


def mcp_payments(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.parametrize("tool", ["pay.blind", "payments.pay"])
async def test_three_resets_to_the_approval_pay_once(client, settings, pg, tmp_path, tool):
    """One approval, a money tool that does not dedupe and has no reader, then three
    ``temporal workflow reset``s to the workflow task that took the approval: each reset run
    takes the approval again and schedules the tool again under the same key; the ledger
    answers it, and the world holds one payment."""
    log = tmp_path / "payments.log"
    s = ledgered(settings, servers_file(tmp_path, log))
    who = account()
    async with running_worker(client, s) as h:
        api = Plangate(client, h.settings)
        handle = await h.start(pay_plan(tool, who))
        run_id = handle.id
        await approve_when_waiting(api, run_id)
        first = await ended(handle)
        assert first.status == "succeeded", first.failure
        link = first.step(1).ledger
        assert link is not None and not link.answered
        run = (await handle.describe()).run_id
        for _ in range(3):
            run = await reset_to(client, run_id, run, await approval_task(client, run_id, run))
            rep: RunReport = await ended(
                client.get_workflow_handle(run_id, run_id=run, result_type=RunReport))
            assert rep.status == "succeeded", rep.failure
            again = rep.step(1).ledger
            # the reset run scheduled the tool again, under the same key; the ledger answered
            assert await scheduled_in(client, run_id, run, tool) == 1
            assert again is not None and again.answered and again.key == link.key
    if tool == "payments.pay":
        paid = mcp_payments(log)
        assert len(paid) == 1
        # the key travels to the server in _meta, for servers that can dedupe
        assert paid[0]["meta"].get(IDEMPOTENCY_META) == link.key
    else:
        assert await payments(pg, who) == 1
    assert await rows(pg, run_id) == [(link.key, tool, "done", "erin")]


async def test_the_ledger_lists_a_run_from_the_cli(client, settings, stack, pg, tmp_path):
    s = ledgered(settings)
    who = account()
    async with running_worker(client, s) as h:
        handle = await h.start(pay_plan("pay.blind", who, 12.5))
        await approve_when_waiting(Plangate(client, h.settings), handle.id)
        assert (await ended(handle)).status == "succeeded"
    env = {**os.environ, **stack.env()}

    async def cli(*more: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "plangate", "ledger", handle.id, *more]
        return await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True,
                                       env=env, cwd=ROOT, timeout=60)

    listed = await cli("--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert (row["run_id"], row["tool"], row["state"], row["effect"]) == (
        handle.id, "pay.blind", "done", "money")
    assert (row["amount"], row["approver"], row["attempts"]) == ("12.5", "erin", 1)
    assert row["output"]["account"] == who
    text = await cli()
    assert text.returncode == 0, text.stderr
    assert f"done    money    pay.blind amount 12.5 run {handle.id} v1 step 1" in text.stdout
    bad = await cli("--limit", "0")
    assert bad.returncode == 2 and "--limit: 0 is not a positive count" in bad.stderr


async def scheduled_call(client: Client, run_id: str, tool: str) -> ToolCall:
    """The ``ToolCall`` a run handed its tool, as the history holds it."""
    for e in await events_of(client, run_id, ""):
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            a = e.activity_task_scheduled_event_attributes
            if a.activity_type.name == tool:
                (call,) = await client.data_converter.decode(a.input.payloads, [ToolCall])
                return cast(ToolCall, call)
    raise AssertionError(f"{run_id} never scheduled {tool}")


def blind_pay(world: World, settings: Settings) -> tuple[Callable[[ToolCall], Any], list[str]]:
    """``pay.blind``'s activity on ``world``, nothing waiting for a person, and the keys its
    tool was called under (none: it never acted)."""
    called: list[str] = []

    async def pay(args: Any, w: World, ctx: CallContext) -> dict[str, JsonValue]:
        called.append(ctx.idempotency_key)
        return {}

    spec = replace(TOOLS["pay.blind"], fn=pay)
    catalogue = replace(settings.catalogue, extensions=(EXTENSION,))
    policy = PolicySettings(approve_effects=())
    return _make(spec, world, policy, ProbeActivities(world, catalogue)), called


def as_run(run_id: str) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = replace(env.info, workflow_id=run_id)
    return env


async def test_an_approval_pays_once_another_key_is_refused_at_the_call(
    client, settings, pg, world
):
    """The grant a person gave, carried by a call under another key (a worker of someone
    else's scheduling the tool with it): refused at the call, naming the effect that consumed
    it; nothing paid, no row for the new key."""
    s = ledgered(settings)
    who = account()
    async with running_worker(client, s) as h:
        handle = await h.start(pay_plan("pay.blind", who))
        await approve_when_waiting(Plangate(client, h.settings), handle.id)
        rep = await ended(handle)
    assert rep.status == "succeeded" and await payments(pg, who) == 1
    call = await scheduled_call(client, handle.id, "pay.blind")
    assert call.approval is not None
    other = call.model_copy(update={"idempotency_key": call.idempotency_key + "-again"})
    pay = tool_activities(world, s.catalogue, s.policy)["pay.blind"]
    with pytest.raises(ApplicationError) as refused:
        await as_run(handle.id).run(pay, other)
    assert refused.value.type == "approval_consumed"
    failure = ToolFailure.model_validate(refused.value.details[0])
    assert (failure.status, failure.detail) == (403, (
        "not called: the approval of step 1 (pay.blind) was consumed by the effect "
        f"{call.idempotency_key}; an approval pays once"
    ))
    assert await payments(pg, who) == 1
    assert [r[0] for r in await rows(pg, handle.id)] == [call.idempotency_key]


async def test_the_ledger_unavailable_the_tool_does_not_act(settings, tmp_path):
    """No intent can be written (Postgres does not answer): the tool is not called, and the
    failure says nothing was sent (retryable, not an outcome to read back)."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = replace(settings.world, database_url=f"postgresql://nobody@127.0.0.1:{port}/x",
                   workdir=tmp_path)
    world = World(dead)
    act, called = blind_pay(world, settings)  # nothing waits: the ledger alone refuses
    call = ToolCall(step=StepRef(run_id="plan-down", plan_version=1, n=1, tool="pay.blind",
                                 args={"account": "a_down", "amount_eur": 1.0}),
                    idempotency_key=keys.idempotency_key("plan-down", "k", "v1/1"))
    try:
        with pytest.raises(ApplicationError) as failed:
            await as_run("plan-down").run(act, call)
    finally:
        await world.close()
    assert called == []
    assert failed.value.type == "system_unavailable"
    assert "the effect ledger: the intent was not recorded" in str(failed.value)
    details = ToolFailure.model_validate(failed.value.details[0])
    assert details.retryable and not details.may_have_acted


async def until_paid(pg: Any, *accounts: str) -> None:
    for _ in range(1200):
        if all([await payments(pg, a) == 1 for a in accounts]):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not paid: {accounts}")


async def test_a_worker_killed_between_a_payment_and_its_outcome(
    client, settings, stack, pg, tmp_path
):
    """SIGKILL of the worker after the tool paid and before the ledger took its outcome. A
    tool without a reader: the step halts ``outcome_unknown``, no second call, and a reset
    that schedules it again is answered by the ledger's open intent, not by a payment. With a
    reader: read back by key, once, and the row done."""
    queue = f"ledger-kill-{uuid.uuid4().hex[:8]}"
    s = ledgered(settings)
    s = replace(s, temporal=replace(s.temporal, task_queue=queue))
    # the killed worker's calls time out at the worker's heartbeat timeout (10 s here)
    env = {**os.environ, **stack.env(), **BEAT_ENV, "PLANGATE_EXTENSIONS": EXTENSION,
           "PLANGATE_TASK_QUEUE": queue, "PLANGATE_APPROVE_EFFECTS": "money"}
    api = Plangate(client, s)
    blind, keyed = account(), account()
    log = await asyncio.to_thread(open, tmp_path / "workers.log", "a")
    first, second = WorkerProcess(env, log), WorkerProcess(env, log)
    try:
        await first.start()
        handles = {}
        for tool, who in (("pay.blind", blind), ("pay.keyed", keyed)):
            handles[tool] = await api.submit(pay_plan(tool, who, hold_s=600))
            await approve_when_waiting(api, handles[tool].id)
        await until_paid(pg, blind, keyed)  # both paid, both holding their answer
        await first.kill()
        await second.start()
        halted = await ended(handles["pay.blind"])
        read_back = await ended(handles["pay.keyed"])
        # the halted run, reset to its approval: the tool is scheduled again
        run_id = handles["pay.blind"].id
        original = (await handles["pay.blind"].describe()).run_id
        run = await reset_to(client, run_id, original,
                             await approval_task(client, run_id, original))
        again: RunReport = await ended(
            client.get_workflow_handle(run_id, run_id=run, result_type=RunReport))
        assert await scheduled_in(client, run_id, run, "pay.blind") == 1
    finally:
        await first.kill()
        await second.kill()
        log.close()
    assert halted.status == "halted" and halted.failure is not None
    assert halted.failure.code == "outcome_unknown"
    assert "has no reader by idempotency key" in halted.failure.detail
    assert await scheduled_in(client, run_id, original, "pay.blind") == 1
    assert again.status == "halted" and again.failure is not None
    assert again.failure.code == "outcome_unknown"
    assert "the effect ledger holds its intent" in again.failure.detail
    assert await payments(pg, blind) == 1
    assert [(r[1], r[2]) for r in await rows(pg, run_id)] == [("pay.blind", "intent")]

    assert read_back.status == "succeeded", read_back.failure
    assert "reading the world by idempotency key" in read_back.step(1).reason
    assert await scheduled_in(client, handles["pay.keyed"].id, "", "pay.keyed") == 1
    assert await payments(pg, keyed) == 1
    assert [(r[1], r[2]) for r in await rows(pg, handles["pay.keyed"].id)] == [
        ("pay.keyed", "done")]


async def test_a_call_under_another_runs_key_is_not_called(settings, world, pg):
    """A workflow of someone else's scheduling a tool under a key of another run (to take that
    run's answer from the ledger, or its key first): refused before the ledger is asked; the
    tool not called, no row written."""
    act, called = blind_pay(world, settings)  # nothing waits: the key alone refuses
    victim = f"plan-{uuid.uuid4().hex[:12]}"
    key = keys.idempotency_key(victim, "0123456789abcdef", "v1/1")
    call = ToolCall(step=StepRef(run_id=victim, plan_version=1, n=1, tool="pay.blind",
                                 args={"account": "a_victim", "amount_eur": 1.0}),
                    idempotency_key=key)
    with pytest.raises(ApplicationError) as refused:
        await as_run("plan-rogue").run(act, call)
    failure = ToolFailure.model_validate(refused.value.details[0])
    assert (refused.value.type, failure.detail) == ("bad_arguments", (
        f"pay.blind: not called: the idempotency key {key!r} is not a key of run plan-rogue"))
    assert called == []
    assert await rows(pg, victim) == [] and await rows(pg, "plan-rogue") == []


async def test_runs_whose_ids_share_their_first_58_characters_keep_their_keys_apart(
    client, settings, pg, world
):
    """Two workflow ids alike but for their last characters (a key made of the first 48 would
    be one for both): each run's keys begin with a digest of its whole id; the other run's
    activity, handed the victim's key while the victim waits for its card, is refused before
    the ledger is asked (no row), and each run then pays once under its own key."""
    s = ledgered(settings)
    shared = f"plan-{uuid.uuid4().hex}-sharing-the-first-48"  # 58 characters
    victim, rogue = f"{shared}-v01", f"{shared}-r02"
    who, other = account(), account()
    act, called = blind_pay(world, settings)
    async with running_worker(client, s) as h:
        api = Plangate(client, h.settings)
        handle = await h.start(pay_plan("pay.blind", who), run_id=victim)
        card = None
        async for rep in api.poll(victim, every_s=0.05):
            pending = [a for a in rep.approvals if a.status == "pending"]
            if pending:
                card = pending[0]
                break
        assert card is not None and card.card.idempotency_key is not None
        key = card.card.idempotency_key
        assert keys.of_workflow(key, victim) and not keys.of_workflow(key, rogue)
        taken = ToolCall(step=StepRef(run_id=victim, plan_version=1, n=1, tool="pay.blind",
                                      args={"account": other, "amount_eur": 1.0}),
                         idempotency_key=key)
        with pytest.raises(ApplicationError) as refused:
            await as_run(rogue).run(act, taken)
        assert await rows(pg, victim) == [] and await rows(pg, rogue) == []
        await api.approve(victim, card.step, card.digest, by="erin")
        paid = await ended(handle)
        second = await h.run_approving(pay_plan("pay.blind", other), run_id=rogue)
    failure = ToolFailure.model_validate(refused.value.details[0])
    assert (refused.value.type, failure.detail) == ("bad_arguments", (
        f"pay.blind: not called: the idempotency key {key!r} is not a key of run {rogue}"))
    assert called == []
    assert paid.status == "succeeded" and second.status == "succeeded"
    assert await payments(pg, who) == 1 and await payments(pg, other) == 1
    assert await rows(pg, victim) == [(key, "pay.blind", "done", "erin")]
    ((own, tool, state, _),) = await rows(pg, rogue)
    assert (tool, state) == ("pay.blind", "done") and own != key
    assert own.startswith(f"{keys.run_part(rogue)}~") and key.startswith(
        f"{keys.run_part(victim)}~")
    assert len(key) < 60 and len(own) < 60  # short: a key is in every history
