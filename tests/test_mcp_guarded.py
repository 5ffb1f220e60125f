"""The catalogue's tools over MCP, each call a one-step guarded run (issue 21): their schemas
and hints; a money call that waits for a person as a task (or a pending run), answered only by
a credentialed approval from the CLI, never by anything an MCP client sends; a retried call
answered by the run its first call started; and a crash of ``plangate mcp`` between a call and
its answer. Judged by the world: credits in ``demo.credits`` and the Temporal history."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from dataclasses import replace
from typing import Any

import psycopg
from mcp_types import CallToolResult
from temporalio.service import RPCError

from plangate.client.api import Plangate
from plangate.demo.schema import Account, seed_account
from plangate.mcp.guarded import GuardedCall
from plangate.plans.model import Effect
from plangate.testing import running_worker, scheduled
from plangate.world.settings import Settings
from tests.harness import APPROVER_NAMES
from tests.mcp_client import (
    REQUEST_ID,
    TaskCreated,
    call_as_task,
    http_server,
    server_env,
    task_request,
    until_task,
)

CREDIT = "billing.issue_credit"
SERVED_CREDIT = "billing_issue_credit"  # its name over MCP (plangate.mcp.names)

WHO = ", ".join(APPROVER_NAMES)  # the session's approvers, as PLANGATE_APPROVERS lists them


def money_waits(settings: Settings) -> Settings:
    return replace(settings, policy=replace(settings.policy,
                                            approve_effects=(Effect.MONEY, Effect.EXTERNAL)))


async def account(world: Any) -> str:
    aid = f"acct_{uuid.uuid4().hex[:8]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", status="closed"))
    return aid


async def credits(pg: Any, aid: str) -> int:
    cur = await pg.execute("SELECT count(*) FROM demo.credits WHERE account_id = %s", (aid,))
    return int((await cur.fetchone())[0])


def run_of(args: dict[str, Any], request_id: str, client: str = "token") -> str:
    """The run id of a call by ``client`` (``http_server``'s one token is the client "token")."""
    return GuardedCall.of(CREDIT, args, {REQUEST_ID: request_id}).run_id(client)


async def test_catalogue_tools_carry_their_schemas_and_effect_hints(client, settings, stack):
    async with http_server(server_env(stack, settings, "unused")) as srv, srv.client() as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
    credit, get = tools[SERVED_CREDIT], tools["s3_get"]
    assert set(credit.input_schema["properties"]) == {"account_id", "amount_eur"}
    assert credit.input_schema.get("additionalProperties") is False
    assert credit.annotations is not None and get.annotations is not None
    assert (credit.annotations.read_only_hint, credit.annotations.destructive_hint,
            credit.annotations.open_world_hint) == (False, True, True)
    assert (get.annotations.read_only_hint, get.annotations.destructive_hint) == (True, False)
    assert tools["s3_put"].annotations is not None
    assert tools["s3_put"].annotations.open_world_hint is False


async def test_a_money_call_waits_for_a_credentialed_person_never_for_the_client(
    client, settings, stack, pg, world
):
    aid = await account(world)
    args = {"account_id": aid, "amount_eur": 42.0}
    rid = f"req-{uuid.uuid4().hex[:8]}"
    async with running_worker(client, money_waits(settings)) as h:
        queue = h.settings.temporal.task_queue
        async with http_server(server_env(stack, settings, queue)) as srv, \
                srv.client(tasks=True) as mcp:
            created = await call_as_task(mcp, SERVED_CREDIT, args, rid)
            assert isinstance(created, TaskCreated), created
            assert created.task_id == run_of(args, rid)
            waiting = await until_task(mcp, created.task_id, "input_required")
            (key, request), = waiting["inputRequests"].items()
            assert request["method"] == "elicitation/create"
            assert request["params"]["mode"] == "url"
            # the line to paste, and who may run it: the approvers the deployment lists (issue
            # 48: a literal "--as NAME" in the line, which failed pasted)
            digest = (await Plangate(client, h.settings).report(created.task_id)).approvals[0]
            assert (f"plangate approve {created.task_id} --step 1 --digest {digest.digest}, "
                    f"run by one of this deployment's approvers ({WHO}); ") in \
                request["params"]["message"], request
            # the client answers the input request: acknowledged, and nothing approved
            ack = await task_request(mcp, "tasks/update", created.task_id,
                                     inputResponses={key: {"action": "accept"}})
            assert ack["resultType"] == "complete"
            # a retried call is the same run, still waiting: not a second card or credit
            again = await call_as_task(mcp, SERVED_CREDIT, args, rid)
            assert isinstance(again, TaskCreated) and again.task_id == created.task_id
            await asyncio.sleep(0.5)
            assert (await task_request(mcp, "tasks/get", created.task_id))["status"] == \
                "input_required"
            assert await credits(pg, aid) == 0
            assert (await scheduled(client, created.task_id)).get(CREDIT, 0) == 0

            api = Plangate(client, h.settings)
            (card,) = (await api.report(created.task_id)).approvals
            # the CLI, as an approver runs it (a process: this loop runs the worker)
            approve = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "plangate", "approve", created.task_id, "--step", "1",
                "--digest", card.digest, "--as", "erin",
                env={**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": queue},
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
            _, err = await asyncio.wait_for(approve.communicate(), 60)
            assert approve.returncode == 0, err.decode()
            done = await until_task(mcp, created.task_id, "completed")
            result = done["result"]
            assert result.get("isError") is not True, result
            assert result["structuredContent"]["status"] == "succeeded"
            assert result["structuredContent"]["state"] == "DONE"
            # retried after the end: answered by the run, applied no second time
            final = await call_as_task(mcp, SERVED_CREDIT, args, rid)
            assert isinstance(final, CallToolResult) and not final.is_error
            assert final.structured_content is not None
            assert final.structured_content["run_id"] == created.task_id
        rep = await api.report(created.task_id)
    assert await credits(pg, aid) == 1
    assert (await scheduled(client, created.task_id)).get(CREDIT) == 1
    assert rep.approvals[0].answer is not None and rep.approvals[0].answer.by == "erin"


async def test_a_client_without_tasks_gets_the_pending_run_and_can_cancel_it(
    client, settings, stack, pg, world
):
    aid = await account(world)
    async with running_worker(client, money_waits(settings)) as h:
        env = server_env(stack, settings, h.settings.temporal.task_queue)
        async with http_server(env) as srv, srv.client() as mcp:
            res = await mcp.call_tool(SERVED_CREDIT, {"account_id": aid, "amount_eur": 7.0})
            assert not res.is_error and res.structured_content is not None
            out = res.structured_content
            assert out["status"] == "awaiting_approval" and out["state"] == "AWAITING_APPROVAL"
            assert out["awaiting"]["approve_with"].startswith(f"plangate approve {out['run_id']}")
            text = res.content[0].text  # type: ignore[union-attr]
            assert (f"{out['awaiting']['approve_with']}, run by one of this deployment's "
                    f"approvers ({WHO}); it signs with the first key of PLANGATE_APPROVER_KEY, "
                    "and --as NAME picks another of them.") in text, text
            stopped = await mcp.call_tool("cancel_run", {
                "run_id": out["run_id"], "reason": "changed my mind"})
            assert not stopped.is_error
            rep = await Plangate(client, h.settings).result(out["run_id"])
    assert rep.status == "cancelled" and rep.cancellation is not None
    assert rep.cancellation.reason == "changed my mind"
    assert await credits(pg, aid) == 0


async def call_then_kill(srv: Any, client: Any, args: dict[str, Any], rid: str, run_id: str
                         ) -> tuple[bool, bool]:
    """Call, wait until the run's tool has begun, kill the server: (the call was still in
    flight at the kill, an answer reached the client)."""
    call: asyncio.Future[Any] | None = None
    in_flight = False
    with contextlib.suppress(Exception):  # the client dies with its server
        async with srv.client() as mcp:
            call = asyncio.ensure_future(call_as_task(mcp, SERVED_CREDIT, args, rid))
            for _ in range(200):
                with contextlib.suppress(RPCError):  # not started yet
                    if (await scheduled(client, run_id)).get(CREDIT):
                        break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # the tool has begun and waits for the row
            in_flight = not call.done()
            srv.kill()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(call, 30)
    answered = call is not None and call.done() and not call.cancelled() \
        and call.exception() is None
    return in_flight, answered


async def test_a_crash_between_the_call_and_its_answer_is_answered_by_the_run(
    client, settings, stack, pg, world
):
    aid = await account(world)
    args = {"account_id": aid, "amount_eur": 13.0}
    rid = f"req-{uuid.uuid4().hex[:8]}"
    run_id = run_of(args, rid)
    async with running_worker(client, settings) as h:
        env = server_env(stack, settings, h.settings.temporal.task_queue)
        api = Plangate(client, h.settings)
        # the account's row held: the credit blocks inside its tool, the call in flight
        url = stack.env()["PLANGATE_DATABASE_URL"]
        async with await psycopg.AsyncConnection.connect(url) as holder, \
                holder.transaction():
            await holder.execute(
                "SELECT 1 FROM demo.customers WHERE account_id = %s FOR UPDATE", (aid,))
            async with http_server(env) as srv:
                in_flight, answered = await call_then_kill(srv, client, args, rid, run_id)
        assert in_flight and not answered  # the server died between the call and its answer
        rep = await api.result(run_id)  # the row released: the run goes on without the server
        assert rep.status == "succeeded"
        async with http_server(env) as srv, srv.client() as mcp:
            retried = await call_as_task(mcp, SERVED_CREDIT, args, rid)
    assert isinstance(retried, CallToolResult) and not retried.is_error
    assert retried.structured_content is not None
    assert retried.structured_content["run_id"] == run_id
    assert retried.structured_content["status"] == "succeeded"
    assert await credits(pg, aid) == 1
    assert (await scheduled(client, run_id)).get(CREDIT) == 1
    runs = [w async for w in client.list_workflows(f"WorkflowId = '{run_id}'")]
    assert len(runs) == 1


async def test_a_failed_one_step_call_says_it_was_not_re_planned(client, settings, pg):
    """A one-step call allows no re-plan: its answer, and the run's summary, say the step
    failed and was not re-planned, not that a re-plan is coming."""
    from plangate.activities.catalogue import catalogue
    from plangate.client.view import summary
    from plangate.mcp.guarded import outcome

    target = f"staging.mcp_missing_{uuid.uuid4().hex[:8]}"
    call = GuardedCall.of("warehouse.load", {"target": target, "source": "mcp/missing.csv"}, None)
    plan = call.plan(catalogue(settings.catalogue).tools["warehouse.load"])
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    cur = await pg.execute("SELECT to_regclass(%s)", (target,))
    assert (await cur.fetchone())[0] is None  # nothing loaded
    assert rep.status == "failed" and rep.replans == [] and rep.replans_max == 0
    said = outcome(rep)
    assert said["reason"] == (
        "failed (not_found); not re-planned: the plan allows none (budget.replans_max 0)")
    assert "  v1 step 1 warehouse.load: FAILED [failed (not_found); not re-planned: the plan " \
           "allows none (budget.replans_max 0)]" in summary(rep).splitlines()
    assert "re-plan" not in said["reason"].replace("not re-planned", "")
