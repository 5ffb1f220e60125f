"""One identity per MCP client (issue 35): every client of ``plangate mcp --http`` is the
client its bearer token names (``PLANGATE_MCP_TOKENS``), submitting with its own key. A client
cannot take another's call (the hijack: pre-creating the run id of someone else's call), cannot
read or cancel another client's run or a run of another queue, is recorded as the requester of
its own cancels, and starts at most so many runs a minute. Judged by the world: credits in
``demo.credits``, the runs and memos Temporal holds, the cancel signal in the history."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from mcp import Client
from mcp_types import CallToolResult
from temporalio.api.enums.v1 import EventType

from plangate.client.api import Plangate
from plangate.errors import ConfigurationError
from plangate.mcp.clients import MEMO, McpClient, RunsLimited, StartLimit, parse_tokens
from plangate.mcp.guarded import GuardedCall
from plangate.records.interface import CANCEL_SIGNAL
from plangate.records.placement import visibility_clause
from plangate.records.run import CancelRequest
from plangate.records.signing import SigningKey
from plangate.testing import history_events, running_worker
from tests.mcp_client import REQUEST_ID, Caller, http_server, server_env, tokens
from tests.test_mcp_guarded import CREDIT, SERVED_CREDIT, account, credits, money_waits


def text_of(res: CallToolResult) -> str:
    """What a refused call says, without the SDK's "Error executing tool X: " before it."""
    text = " ".join(getattr(c, "text", "") for c in res.content)
    return text.split(": ", 1)[1] if text.startswith("Error executing tool ") else text


def identity(request_id: str) -> Any:
    """A call's ``_meta`` carrying its request identity."""
    return {REQUEST_ID: request_id}


async def runs_on(client: Any, queue: str, at_least: int) -> dict[str, Any]:
    """Every run visibility lists on the deployment's ``queue`` once it lists ``at_least``
    (it is eventually consistent), by id, with its MCP memo (None: not started over MCP)."""
    for _ in range(1200):  # 60 s at most: visibility lags further under load
        ids = [w.id async for w in client.list_workflows(visibility_clause(queue))]
        if len(ids) >= at_least:
            break
        await asyncio.sleep(0.05)
    found: dict[str, Any] = {}
    for run_id in ids:
        desc = await client.get_workflow_handle(run_id).describe()
        found[run_id] = await desc.memo_value(MEMO, default=None)
    return found


async def until_waiting(mcp: Client, run_id: str) -> dict[str, Any]:
    for _ in range(1200):  # 60 s at most
        res = await mcp.call_tool("run_report", {"run_id": run_id})
        assert not res.is_error, text_of(res)
        rep: dict[str, Any] | None = res.structured_content
        assert rep is not None
        if rep["status"] == "awaiting_approval":
            return rep
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} never waited for a person")


# -- the token map -------------------------------------------------------------------------


def test_tokens_name_clients_and_their_keys(tmp_path):
    a, b = Caller.new("alice"), Caller.new("bob")
    server_key = SigningKey.generate("server")
    bare = f"carol:{Caller.new('carol').token},dave:{Caller.new('dave').token}"
    found = parse_tokens(f"{a.entry}, {b.entry},{bare}", server_key)
    assert {c.name: c.submitter for c in found.values()} == {
        "alice": "alice-sub", "bob": "bob-sub", "carol": "server", "dave": "server"}
    assert found[a.token].submitter_key == a.key
    listed = tmp_path / "tokens"
    listed.write_text(f"# one client a line\n{a.entry}\n\n{b.entry}  # bob\n")
    assert {c.name for c in parse_tokens(str(listed), None).values()} == {"alice", "bob"}


@pytest.mark.parametrize("raw, why", [
    ("alice", "PLANGATE_MCP_TOKENS entry 1: not CLIENT:TOKEN[:SUBMITTER_KEY]"),
    ("alice:short", "PLANGATE_MCP_TOKENS entry 1 (the token of alice) is too weak"),
    ("alice:{t}", None),
    ("alice:{t},alice:{u}", "PLANGATE_MCP_TOKENS entry 2: a second client named alice"),
    ("alice:{t},bob:{t}", "PLANGATE_MCP_TOKENS entry 2: bob has the token of alice"),
    ("alice:{t}:{k},bob:{u}:{k}", "PLANGATE_MCP_TOKENS: clients alice and bob submit with one "
                                  "key (shared), so one principal; give each client a "
                                  "submitter key of its own"),
])
def test_a_token_map_that_cannot_be_used_is_refused_naming_the_entry(raw, why):
    t, u = Caller.new("x").token, Caller.new("y").token
    k = SigningKey.generate("shared").text()
    raw = raw.format(t=t, u=u, k=k)
    if why is None:
        assert len(parse_tokens(raw, None)) == 1
        return
    with pytest.raises(ConfigurationError) as refused:
        parse_tokens(raw, None)
    assert str(refused.value).startswith(why)
    assert t not in str(refused.value) and u not in str(refused.value)  # never a secret


def test_runs_started_per_client_are_limited_and_each_refusal_counted():
    now = [1000.0]
    limit = StartLimit(2, clock=lambda: now[0])
    alice, bob = McpClient("alice"), McpClient("bob")
    limit.admit(alice)
    limit.admit(alice)
    limit.admit(bob)  # another client's runs are its own count
    with pytest.raises(RunsLimited) as refused:
        limit.admit(alice)
    assert str(refused.value).startswith(
        "MCP client alice started 2 runs in the last minute, the most this server allows "
        "(PLANGATE_MCP_RUNS_PER_MINUTE=2)")
    assert limit.refused == {"alice": 1}
    now[0] += 60.0  # a minute on: the first two have left the window
    limit.admit(alice)
    assert limit.refused == {"alice": 1}


# -- against the real server ---------------------------------------------------------------


async def test_another_client_cannot_take_a_call_by_its_run_id(
    client, settings, stack, pg, world
):
    alice, mallory = Caller.new("alice"), Caller.new("mallory")
    victim, target = await account(world), await account(world)
    mine = {"account_id": victim, "amount_eur": 7.5}
    theirs = {"account_id": target, "amount_eur": 999.0}
    rid = f"req-{uuid.uuid4().hex[:8]}"
    alices_run = GuardedCall.of(CREDIT, mine, {REQUEST_ID: rid}).run_id("alice")
    attack = {"goal": "pay me", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": CREDIT, "effect": "money", "args": theirs}]}
    async with running_worker(client, money_waits(settings)) as h:
        queue = h.settings.temporal.task_queue
        env = server_env(stack, settings, queue)
        async with http_server(env, tokens=tokens(alice, mallory)) as srv, \
                srv.client(token=mallory.token) as evil, srv.client(token=alice.token) as mcp:
            # the attacker pre-creates the id of alice's call, with a plan of its own: refused
            taken = await evil.call_tool("run_plan", {"plan": attack, "run_id": alices_run})
            assert taken.is_error
            assert text_of(taken) == (
                f"run_id {alices_run!r}: ids beginning 'mcp-' are this server's (guarded "
                "calls); choose another, or none")
            # the same request id from another client is that client's own call, another run
            same_rid = await evil.call_tool(SERVED_CREDIT, theirs, meta=identity(rid))
            assert same_rid.structured_content is not None
            evil_run = same_rid.structured_content["run_id"]
            assert evil_run != alices_run
            # alice's call runs her own plan, and says exactly what waits for a person
            answer = await mcp.call_tool(SERVED_CREDIT, mine, meta=identity(rid))
            assert not answer.is_error and answer.structured_content is not None
            out = answer.structured_content
            assert out["run_id"] == alices_run and out["status"] == "awaiting_approval"
            assert (out["awaiting"]["tool"], out["awaiting"]["args"]) == (CREDIT, mine)
            await Plangate(client, h.settings).approve(
                alices_run, out["awaiting"]["step"], out["awaiting"]["digest"], by="erin")
            again = await mcp.call_tool(SERVED_CREDIT, mine, meta=identity(rid))
            assert again.structured_content is not None
            assert again.structured_content["status"] == "succeeded"
            await evil.call_tool("cancel_run", {"run_id": evil_run, "reason": "test over"})
        held = await runs_on(client, queue, 2)
    assert await credits(pg, victim) == 1
    assert await credits(pg, target) == 0  # 0 effects of the attacker's plan
    assert held[alices_run]["client"] == "alice"
    assert held[alices_run]["submitter"] == "alice-sub"
    assert set(held) == {alices_run, evil_run}  # the refused plan started nothing


async def test_an_id_held_by_a_run_that_is_not_this_call_is_refused_and_left_alone(
    client, settings, stack, pg, world
):
    """Someone with Temporal's API (not an MCP client) started a run under the id a call
    derives: the call is refused, that run neither answers it nor is touched."""
    alice = Caller.new("alice")
    victim, target = await account(world), await account(world)
    mine = {"account_id": victim, "amount_eur": 7.5}
    rid = f"req-{uuid.uuid4().hex[:8]}"
    run_id = GuardedCall.of(CREDIT, mine, {REQUEST_ID: rid}).run_id("alice")
    async with running_worker(client, money_waits(settings)) as h:
        env = server_env(stack, settings, h.settings.temporal.task_queue)
        api = Plangate(client, h.settings)
        await api.start({"goal": "squat", "budget": {"replans_max": 0}, "steps": [
            {"n": 1, "tool": CREDIT, "effect": "money",
             "args": {"account_id": target, "amount_eur": 999.0}}]}, run_id=run_id)
        async with http_server(env, tokens=tokens(alice)) as srv, \
                srv.client(token=alice.token) as mcp:
            refused = await mcp.call_tool(SERVED_CREDIT, mine, meta=identity(rid))
        assert refused.is_error
        assert text_of(refused) == (
            f"the run id of this call ({run_id}) is held by a run that is not this client's "
            "run of this call: nothing was started; call again with another request id")
        desc = await client.get_workflow_handle(run_id).describe()
        assert await desc.memo_value(MEMO, default=None) is None
        await api.cancel(run_id, reason="test over")
    assert await credits(pg, victim) == 0 and await credits(pg, target) == 0


async def test_a_client_reads_and_cancels_only_its_own_runs(client, settings, stack, pg, world):
    alice, bob = Caller.new("alice"), Caller.new("bob")
    aid = await account(world)
    args = {"account_id": aid, "amount_eur": 5.0}
    async with running_worker(client, money_waits(settings)) as h, \
            running_worker(client, money_waits(settings)) as other:
        env = server_env(stack, settings, h.settings.temporal.task_queue)
        elsewhere = server_env(stack, settings, other.settings.temporal.task_queue)
        async with http_server(env, tokens=tokens(alice, bob)) as srv, \
                http_server(elsewhere, tokens=tokens(alice, bob)) as srv2:
            async with srv2.client(token=alice.token) as mcp2:  # alice, on another queue
                there = await mcp2.call_tool(SERVED_CREDIT, args)
            assert there.structured_content is not None
            other_queue = there.structured_content["run_id"]
            async with srv.client(token=alice.token) as mcp, srv.client(token=bob.token) as b:
                res = await mcp.call_tool(SERVED_CREDIT, args)
                assert res.structured_content is not None
                run_id = res.structured_content["run_id"]
                for tool, params in (("run_report", {}), ("cancel_run", {"reason": "mine"})):
                    stolen = await b.call_tool(tool, {"run_id": run_id, **params})
                    assert stolen.is_error, tool
                    assert text_of(stolen) == \
                        f"no run with id {run_id!r} started by MCP client bob"
                    far = await mcp.call_tool(tool, {"run_id": other_queue, **params})
                    assert far.is_error and text_of(far) == \
                        f"no run with id {other_queue!r} started by MCP client alice"
                assert (await until_waiting(mcp, run_id))["run_id"] == run_id
                stopped = await mcp.call_tool("cancel_run", {"run_id": run_id, "reason": "done"})
                assert not stopped.is_error and stopped.structured_content is not None
                assert stopped.structured_content["requester"] == "MCP client alice"
            api = Plangate(client, h.settings)
            rep = await api.result(run_id)
            far_rep = await Plangate(client, other.settings).report(other_queue)
            await Plangate(client, other.settings).cancel(other_queue, reason="test over")
    assert far_rep.status == "awaiting_approval"  # bob's and alice's refused cancels: no effect
    assert rep.status == "cancelled" and rep.cancellation is not None
    assert rep.cancellation.requester == "MCP client alice"
    signals = [e.workflow_execution_signaled_event_attributes
               for e in await history_events(client, run_id)
               if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED]
    assert [s.signal_name for s in signals] == [CANCEL_SIGNAL]  # one cancel: alice's own
    (request,) = await client.data_converter.decode(signals[0].input.payloads, [CancelRequest])
    assert (request.reason, request.requester) == ("done", "MCP client alice")
    assert await credits(pg, aid) == 0


async def test_a_client_past_its_limit_starts_nothing_more(client, settings, stack, s3):
    alice, bob = Caller.new("alice"), Caller.new("bob")
    bucket = f"mcp-limit-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)

    def plan(i: int) -> dict[str, Any]:
        return {"goal": "drop a note", "budget": {"replans_max": 0}, "steps": [
            {"n": 1, "tool": "s3.put", "args": {"bucket": bucket, "key": f"n{i}", "body": "x"}}]}

    async with running_worker(client, settings) as h:
        queue = h.settings.temporal.task_queue
        env = {**server_env(stack, settings, queue), "PLANGATE_MCP_RUNS_PER_MINUTE": "2"}
        async with http_server(env, tokens=tokens(alice, bob)) as srv, \
                srv.client(token=alice.token) as mcp, srv.client(token=bob.token) as b:
            for i in range(2):
                assert not (await mcp.call_tool("run_plan", {"plan": plan(i)})).is_error
            third = await mcp.call_tool("run_plan", {"plan": plan(2)})
            assert third.is_error
            assert text_of(third).startswith(
                "MCP client alice started 2 runs in the last minute, the most this server "
                "allows (PLANGATE_MCP_RUNS_PER_MINUTE=2)")
            assert text_of(third).endswith("(refused so far: 1)")
            assert not (await b.call_tool("run_plan", {"plan": plan(3)})).is_error
        held = await runs_on(client, queue, 3)
    assert sorted(m["client"] for m in held.values()) == ["alice", "alice", "bob"]
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}
    assert "n2" not in keys


def _answer(resp: Any) -> dict[str, Any]:
    """The JSON-RPC answer of a streamable HTTP response: a JSON body or an SSE stream."""
    if resp.headers.get("content-type", "").startswith("application/json"):
        answer: dict[str, Any] = resp.json()
        return answer
    for line in resp.text.splitlines():
        if line.startswith("data:") and '"id"' in line:
            found: dict[str, Any] = json.loads(line[5:])
            return found
    raise AssertionError(f"no JSON-RPC answer in {resp.text!r}")


async def test_a_session_id_acts_as_whoever_sends_it(client, settings, stack, world):
    """Session hijacking: a session id belongs to the session, the identity to each request.
    Bob sending alice's session id with his own token is bob, and cannot read her run."""
    import httpx2

    alice, bob = Caller.new("alice"), Caller.new("bob")
    aid = await account(world)
    async with running_worker(client, money_waits(settings)) as h:
        env = server_env(stack, settings, h.settings.temporal.task_queue)
        async with http_server(env, tokens=tokens(alice, bob)) as srv:
            async with srv.client(token=alice.token) as mcp:
                res = await mcp.call_tool(SERVED_CREDIT, {"account_id": aid, "amount_eur": 3.0})
            assert res.structured_content is not None
            run_id = res.structured_content["run_id"]
            base = {"Accept": "application/json, text/event-stream",
                    "Content-Type": "application/json"}
            async with httpx2.AsyncClient(timeout=60) as http:
                opened = await http.post(srv.url, headers={
                    **base, "Authorization": f"Bearer {alice.token}"}, json={
                    "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                        "protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "1"}}})
                session = opened.headers["mcp-session-id"]
                held = {**base, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
                await http.post(srv.url, headers={**held, "Authorization": f"Bearer {alice.token}"},
                                json={"jsonrpc": "2.0", "method": "notifications/initialized"})
                asks = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                    "name": "run_report", "arguments": {"run_id": run_id}}}
                as_bob = _answer(await http.post(
                    srv.url, headers={**held, "Authorization": f"Bearer {bob.token}"}, json=asks))
                as_alice = _answer(await http.post(
                    srv.url, headers={**held, "Authorization": f"Bearer {alice.token}"},
                    json={**asks, "id": 3}))
        await Plangate(client, h.settings).cancel(run_id, reason="test over")
    assert as_bob["result"]["isError"] is True
    assert as_bob["result"]["content"][0]["text"].endswith(
        f"no run with id {run_id!r} started by MCP client bob")
    assert as_alice["result"]["isError"] is False
    assert as_alice["result"]["structuredContent"]["run_id"] == run_id


@pytest.mark.parametrize(("env", "line"), [
    ({"PLANGATE_MCP_RUNS_PER_MINUTE": "x"},
     "plangate: mcp: PLANGATE_MCP_RUNS_PER_MINUTE must be a whole number of at least 0, not 'x'"),
    ({"PLANGATE_MCP_TOKENS": "a:short"},
     "plangate: mcp: PLANGATE_MCP_TOKENS entry 1 (the token of a) is too weak: about 10 bits of "
     "entropy by a conservative estimate, at least 128 are needed (a short or repetitive token "
     "can be guessed); make one with: python3 -c 'import secrets; print(secrets.token_urlsafe("
     "32))'"),
    ({"PLANGATE_MCP_TOKENS": "a:{t},b:{t}"}, "plangate: mcp: PLANGATE_MCP_TOKENS entry 2: b has "
                                             "the token of a"),
    ({"PLANGATE_MCP_TOKENS": "a:{t}", "PLANGATE_MCP_TOKEN": "{t}"},
     "plangate: mcp: set PLANGATE_MCP_TOKENS or PLANGATE_MCP_TOKEN, not both"),
])
def test_an_identity_setting_that_cannot_be_used_stops_the_server(tmp_path, env, line):
    """As users run it: one line naming what is wrong, exit 2, nothing served."""
    import subprocess
    import sys

    t = Caller.new("x").token
    done = subprocess.run(
        [sys.executable, "-m", "plangate", "mcp", "--http", "--port", "0"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
             **{k: v.format(t=t) for k, v in env.items()}},
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [line]
    assert done.stdout == "" and t not in done.stderr
