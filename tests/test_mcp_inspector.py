"""The MCP Inspector CLI (npm, pinned in tests/node), a client nobody here wrote, on ``plangate
mcp`` over stdio and over HTTP, on both protocol eras it offers (legacy: the 2025-11-25
handshake; modern: 2026-07-28, where it declares the Tasks extension and follows a task to its
end): the tools listed, a plan checked, a guarded call that succeeds, and a money call that
waits for a person (its run id in what the Inspector prints, never a JSON-RPC error),
approved with ``plangate approve`` and then answered. Judged by the world (the S3 object, the
credit rows), the Temporal history of each run, and the runs on the test's queue: every one
is named in something the Inspector printed (no orphan run)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plangate.client.api import Plangate
from plangate.records.report import RunReport
from plangate.testing import running_worker, scheduled
from plangate.world.settings import Settings
from tests.inspector import Answer, Inspector, stdio_env
from tests.mcp_client import http_server, server_env
from tests.test_mcp_guarded import CREDIT, account, credits, money_waits
from tests.test_mcp_identity import runs_on

PUT = "s3.put"
PLAN_TOOLS = {"check_plan", "run_plan", "run_report", "cancel_run"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def served(tools: dict[str, dict[str, Any]], name: str) -> str:
    """The name the catalogue tool ``name`` is served under (its title is ``name``)."""
    (found,) = [n for n, t in tools.items() if name in (n, t.get("title"))]
    return found


@contextlib.asynccontextmanager
async def inspector(transport: str, era: str, stack: Any, settings: Settings, queue: str,
                    home: Path) -> AsyncIterator[Inspector]:
    """The Inspector on ``plangate mcp`` with the stack's environment on ``queue``: launched
    by the Inspector itself (stdio), or a ``--http`` server process with a bearer token."""
    if transport == "stdio":
        yield Inspector.stdio(stdio_server_env(stack, settings, queue), era, home)
        return
    async with http_server(server_env(stack, settings, queue)) as srv:
        yield Inspector.http(srv.url, srv.token, era, home)


def stdio_server_env(stack: Any, settings: Settings, queue: str) -> dict[str, str]:
    return {**stdio_env(stack, queue), "PLANGATE_WORKDIR": str(settings.world.workdir)}


def result(answer: Answer) -> dict[str, Any]:
    """A tool call's result as the Inspector printed it: never a JSON-RPC error."""
    got = answer.json()
    assert "error" not in got and "result" in got, got
    out: dict[str, Any] = got["result"]
    return out


async def approve(stack: Any, queue: str, run_id: str, step: int, digest: str) -> None:
    """``plangate approve`` as an approver runs it (a process: this loop runs the worker)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "plangate", "approve", run_id, "--step", str(step),
        "--digest", digest, "--as", "erin",
        env={**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": queue},
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()


async def waiting_card(api: Plangate, known: set[str]) -> RunReport:
    """The one run on the queue not in ``known``, once a card of it waits: read from Temporal
    (what the server started), not from anything the Inspector printed."""
    for _ in range(600):
        fresh = [r.run_id for r in await api.runs() if r.run_id not in known]
        if fresh:
            (run_id,) = fresh
            rep = await api.report(run_id)
            if any(a.status.value == "pending" for a in rep.approvals):
                return rep
        await asyncio.sleep(0.1)
    raise AssertionError(f"no run waiting for a person beside {known}")


def whole_lines(path: Path) -> list[str]:
    """The lines written in full so far (``tee`` may be mid-line)."""
    text = path.read_text() if path.exists() else ""
    return text.splitlines()[: text.count("\n")]


async def polled(wire: Path, run_id: str, proc: asyncio.subprocess.Process) -> dict[str, Any]:
    """The first ``tasks/get`` answer the server gave the Inspector (``wire``) while ``run_id``
    waited for a person (its approve line in the answer)."""
    for _ in range(600):
        for line in await asyncio.to_thread(whole_lines, wire):
            got = json.loads(line).get("result") or {}
            if got.get("taskId") == run_id and got.get("resultType") == "complete" and \
                    f"plangate approve {run_id}" in got.get("statusMessage", ""):
                return dict(got)
        if proc.returncode is not None:
            ended = await Inspector.finish(proc)
            raise AssertionError(f"the Inspector ended before it polled its task: {ended}")
        await asyncio.sleep(0.1)
    raise AssertionError(f"the Inspector never polled {run_id}")


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_inspector_lists_checks_calls_and_waits_for_a_person(
    transport, era, client, settings, stack, s3, pg, world, tmp_path
):
    bucket, key, body = unique("insp-drops"), unique("note") + ".txt", unique("hello")
    s3.create_bucket(Bucket=bucket)
    aid = await account(world)
    printed: list[str] = []  # everything the Inspector printed: the no-orphan rule's source
    async with running_worker(client, money_waits(settings)) as h:
        queue = h.settings.temporal.task_queue
        api = Plangate(client, h.settings)
        async with inspector(transport, era, stack, settings, queue, tmp_path) as insp:
            tools = await insp.tools()
            assert set(tools) >= PLAN_TOOLS, sorted(tools)
            put, credit = served(tools, PUT), served(tools, CREDIT)

            # a plan checked: valid; broken, the problem names its step and field
            good = {"goal": "drop a note", "steps": [
                {"n": 1, "tool": PUT, "args": {"bucket": bucket, "key": key, "body": body}}]}
            bad = {"goal": "broken", "steps": [
                {"n": 1, "tool": PUT, "args": {"key": "k", "body": "x"}}]}
            checked = result(await insp.call("check_plan", {"plan": good}))
            assert checked["structuredContent"]["valid"] is True, checked
            refused = result(await insp.call("check_plan", {"plan": bad}))["structuredContent"]
            assert refused["valid"] is False
            assert [(p["step"], p["field"]) for p in refused["problems"]] == \
                [(1, "args.bucket")], refused

            # a guarded call that succeeds: the object written, one s3.put in its history
            answer = await insp.call(put, {"bucket": bucket, "key": key, "body": body,
                                           "if_none_match": "*"}, unique("req"))
            printed.append(answer.out)
            done = result(answer)
            assert done.get("isError") is not True, done
            run_put = done["structuredContent"]["run_id"]
            assert done["structuredContent"]["status"] == "succeeded", done
            assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body.encode()
            assert (await scheduled(client, run_put)).get(PUT) == 1

            # a money call that waits for a person
            args, rid = {"account_id": aid, "amount_eur": 7.5}, unique("req")
            if era == "legacy":
                answer = await insp.call(credit, args, rid)
                printed.append(answer.out)
                pending = result(answer)
                assert pending.get("isError") is not True, pending
                out = pending["structuredContent"]
                assert (out["status"], out["state"]) == ("awaiting_approval",
                                                         "AWAITING_APPROVAL"), out
                run_credit, card = out["run_id"], out["awaiting"]
                assert card["tool"] == CREDIT and card["step"] == 1
                assert card["approve_with"].startswith(f"plangate approve {run_credit} ")
                assert run_credit in pending["content"][0]["text"]
                assert await credits(pg, aid) == 0
                await approve(stack, queue, run_credit, card["step"], card["digest"])
            else:
                # the Inspector follows the task it is answered with until it completes:
                # approved while it waits (having polled the waiting run at least once, where
                # the server's answers are recorded), then it prints the call's answer
                wire = tmp_path / "wire.jsonl"
                caller = Inspector.stdio_recorded(stdio_server_env(stack, settings, queue),
                                                  era, tmp_path, wire) \
                    if transport == "stdio" else insp
                async with caller.calling(credit, args, rid) as proc:
                    waiting = await waiting_card(api, {run_put})
                    run_credit = waiting.run_id
                    if transport == "stdio":
                        seen = await polled(wire, run_credit, proc)
                        # the Inspector declared no elicitation: the run is working to it,
                        # sent no input request it could never answer
                        assert seen["status"] == "working", seen
                        assert "inputRequests" not in seen
                    assert await credits(pg, aid) == 0
                    assert proc.returncode is None  # still following its task
                    (card,) = waiting.approvals
                    await approve(stack, queue, run_credit, card.step, card.digest)
                    answer = await Inspector.finish(proc)
                printed.append(answer.out)
                followed = result(answer)
                assert followed.get("isError") is not True, followed
                assert followed["structuredContent"]["run_id"] == run_credit
                assert followed["structuredContent"]["status"] == "succeeded", followed

            # then answered: the same call (its request identity) answers the run's outcome
            answer = await insp.call(credit, args, rid)
            printed.append(answer.out)
            final = result(answer)
            assert final.get("isError") is not True, final
            assert final["structuredContent"]["run_id"] == run_credit
            assert final["structuredContent"]["status"] == "succeeded", final
            assert final["structuredContent"]["result"]["account_id"] == aid
            reported = result(await insp.call("run_report", {"run_id": run_credit}))
            assert reported["structuredContent"]["status"] == "succeeded", reported
        held = await runs_on(client, queue, 2)
        rep = await api.report(run_credit)
    assert await credits(pg, aid) == 1
    assert (await scheduled(client, run_credit)).get(CREDIT) == 1
    assert rep.approvals[0].answer is not None and rep.approvals[0].answer.by == "erin"
    # no orphan: every run the server started is named in what the Inspector printed
    assert set(held) == {run_put, run_credit}
    assert all(any(r in out for out in printed) for r in held)
