"""The effect ledger (``plangate.effects``): plangate's own record of what it did, so no effect
happens twice whatever resets, retries or re-dispatches, with tools that do not dedupe (an
extension tool, ``tests.ledger_tools``, and a back-door MCP server's tool, ``tests/ledger_server``)
against the real Temporal, Postgres and MCP server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client

from plangate.client.api import Plangate
from plangate.plans.model import Effect
from plangate.records.report import RunReport
from plangate.testing import ended, running_worker
from plangate.world.mcp_sessions import IDEMPOTENCY_META
from plangate.world.settings import Settings

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
    for _ in range(400):
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
        api = Plangate(client, s)
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
        await approve_when_waiting(Plangate(client, s), handle.id)
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
    assert f"done    money    pay.blind 12.5 run {handle.id} v1 step 1" in text.stdout
    bad = await cli("--limit", "0")
    assert bad.returncode == 2 and "--limit: 0 is not a positive count" in bad.stderr
