"""`plangate mcp` over stdio and over streamable HTTP, driven by the official `mcp` client: the
plan tools (check, run, report, cancel) and the catalogue, against the test stack and a real
worker. What each call did is read back from the world (the S3 object) and from the Temporal
history (the cancel). The HTTP server's access (token, loopback) is tested as users start it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client
from mcp_types import TextResourceContents
from temporalio.api.enums.v1 import EventType

from plangate.records.interface import CANCEL_SIGNAL
from plangate.records.run import CancelRequest
from plangate.testing import history_events, running_worker
from tests.harness import polling_plan
from tests.mcp_client import http_server, server_env, stdio

PLAN_TOOLS = {"check_plan", "run_plan", "run_report", "cancel_run"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def put_plan(bucket: str, key: str, body: str) -> dict[str, Any]:
    return {"goal": "drop a note", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put",
         "args": {"bucket": bucket, "key": key, "body": body, "if_none_match": "*"}},
    ]}


@contextlib.asynccontextmanager
async def server(transport: str, stack, settings, task_queue: str) -> AsyncIterator[Client]:
    """The official client on `python -m plangate mcp` (stdio, or an `--http` server process
    with a token), with the stack's environment on the worker's task queue."""
    env = server_env(stack, settings, task_queue)
    if transport == "stdio":
        async with stdio(env) as mcp:
            yield mcp
        return
    async with http_server(env) as srv, srv.client() as mcp:
        yield mcp


async def call(mcp: Client, tool: str, **args: Any) -> Any:
    result = await mcp.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


async def until_final(mcp: Client, run_id: str) -> dict[str, Any]:
    for _ in range(300):
        rep: dict[str, Any] = await call(mcp, "run_report", run_id=run_id)
        if rep["status"] in ("succeeded", "halted", "cancelled", "failed"):
            return rep
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run_id} never ended")


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_plan_tools(transport, client, settings, stack, s3):
    bucket, key, body = unique("mcp-drops"), unique("note") + ".txt", unique("hello")
    s3.create_bucket(Bucket=bucket)
    async with running_worker(client, settings) as h, \
            server(transport, stack, settings, h.settings.temporal.task_queue) as mcp:
        listed = {t.name: t for t in (await mcp.list_tools()).tools}
        assert set(listed) >= PLAN_TOOLS
        # no approve tool: an MCP client never answers a card; the rest are the catalogue's
        assert not [n for n in listed if "approve" in n]
        assert {"s3_put", "billing_issue_credit"} <= set(listed)
        # who cancels is the authenticated client, never a name the client types
        assert set(listed["cancel_run"].input_schema["properties"]) == {"run_id", "reason"}
        assert listed["run_plan"].input_schema["properties"]["plan"]["type"] == "object"
        # plangate's own tools: described without the source's indentation, hinted
        for name in PLAN_TOOLS:
            lines = (listed[name].description or "").splitlines()
            assert lines and not [x for x in lines if x[:1].isspace()], (name, lines)
        hinted = {n: listed[n].annotations for n in PLAN_TOOLS}
        assert all(a is not None for a in hinted.values()), hinted
        assert {n for n, a in hinted.items() if a and a.read_only_hint} == {
            "check_plan", "run_report"}
        assert hinted["run_plan"] and hinted["run_plan"].destructive_hint is True

        (text,) = (await mcp.read_resource("plangate://catalogue")).contents
        assert isinstance(text, TextResourceContents)
        cat = {t["name"]: t for t in json.loads(text.text)["tools"]}
        assert cat["s3.put"]["effect"] == "write" and cat["billing.issue_credit"]["effect"] == \
            "money"
        assert "bucket" in cat["s3.put"]["args_schema"]["properties"]
        assert cat["s3.put"]["contract"]["post"], "s3.put's post condition is in its contract"

        bad = {"goal": "broken", "steps": [
            {"n": 1, "tool": "s3.put", "args": {"key": "k", "body": "x"}},
            {"n": 2, "tool": "s3.shred", "depends_on": [1], "args": {}},
        ]}
        checked = await call(mcp, "check_plan", plan=bad)
        assert checked["valid"] is False
        named = {(p["step"], p["field"]) for p in checked["problems"]}
        assert (1, "args.bucket") in named and (2, "tool") in named, checked["problems"]
        refused = await mcp.call_tool("run_plan", {"plan": bad})
        assert refused.is_error and "s3.shred" in str(refused.content)

        good = put_plan(bucket, key, body)
        assert (await call(mcp, "check_plan", plan=good))["valid"] is True
        run_id = (await call(mcp, "run_plan", plan=good))["run_id"]
        rep = await until_final(mcp, run_id)
        assert rep["run_id"] == run_id and rep["status"] == "succeeded"
        assert rep["steps"][0]["state"] == "DONE"
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body.encode()

        waiting = (await call(mcp, "run_plan", plan=polling_plan(unique("mcp-job"))))["run_id"]
        for _ in range(200):  # step 1 waits for a job that never ends
            rep = await call(mcp, "run_report", run_id=waiting)
            if rep["steps"][0]["state"] == "WAITING":
                break
            await asyncio.sleep(0.05)
        assert rep["steps"][0]["state"] == "WAITING", rep["steps"][0]
        cancelled = await call(mcp, "cancel_run", run_id=waiting, reason="goal withdrawn")
        assert cancelled["run_id"] == waiting
        rep = await until_final(mcp, waiting)
        assert rep["status"] == "cancelled"
        assert rep["cancellation"]["reason"] == "goal withdrawn"
        again = await mcp.call_tool("cancel_run", {"run_id": waiting, "reason": "again"})
        assert again.is_error and "already ended" in str(again.content)

    signals = [e.workflow_execution_signaled_event_attributes
               for e in await history_events(client, waiting)
               if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED]
    assert [s.signal_name for s in signals] == [CANCEL_SIGNAL]
    (request,) = await client.data_converter.decode(signals[0].input.payloads, [CancelRequest])
    who = "stdio" if transport == "stdio" else "token"  # the server's one client, or its token's
    assert (request.reason, request.requester) == ("goal withdrawn", f"MCP client {who}")


def refused_start(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "plangate", "mcp", "--http", "--port", "0", *args],
        env={**{k: v for k, v in os.environ.items() if k != "PLANGATE_MCP_TOKEN"}, **env},
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )


def test_http_access_is_decided_before_anything_is_bound():
    off_loopback = refused_start("--host", "0.0.0.0")
    assert off_loopback.returncode == 2, off_loopback
    assert "refusing to listen on 0.0.0.0 without PLANGATE_MCP_TOKEN" in off_loopback.stderr
    not_told = refused_start()
    assert not_told.returncode == 2 and "--insecure-local" in not_told.stderr, not_told
    weak = refused_start("--host", "0.0.0.0", PLANGATE_MCP_TOKEN="secret")
    assert weak.returncode == 2 and "PLANGATE_MCP_TOKEN is too weak" in weak.stderr, weak
    assert "plangate mcp: http" not in off_loopback.stdout + not_told.stdout + weak.stdout


async def test_http_refuses_a_request_without_the_token(client, settings, stack):
    import httpx2

    async with http_server(server_env(stack, settings, "unused")) as srv:
        async with httpx2.AsyncClient() as http:
            bare = await http.post(srv.url, json={"jsonrpc": "2.0", "id": 1,
                                                  "method": "server/discover", "params": {}})
            wrong = await http.post(srv.url, headers={"Authorization": "Bearer " + "x" * 43},
                                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert (bare.status_code, wrong.status_code) == (401, 401)
        with pytest.raises(Exception):  # noqa: B017 (the client fails however it reports a 401)
            async with srv.client(token="y" * 43) as mcp:
                await mcp.list_tools()
        async with srv.client() as mcp:  # the right token: served
            assert "check_plan" in {t.name for t in (await mcp.list_tools()).tools}
