"""What the MCP gateway costs, measured side by side in one run:

1. a guarded call through ``plangate mcp`` (stdio) of a read tool of the git MCP server,
   answered by the worker without a run (a standalone activity: guards derived by the worker,
   the tool called over its own session to the git server), the same call as a one-step
   guarded run (a second ``plangate mcp`` with ``PLANGATE_MCP_READS=run``), and the same read
   tool called directly on the git server (``mcp-server-git`` over stdio), and a bare
   standalone activity round trip (a no-op activity on a worker of this process, started and
   awaited by this process's client, as the front starts and awaits a read): p50 of each, each
   guarded path's ratio to direct, and the read by the worker against its goal (issue 50: at
   most the direct read plus one bare round trip, plus 20%);
2. a one-step guarded run (``s3.put``) started over MCP, its answer awaited, against the same
   run started through the Python API (``start`` then ``result``): p50 of each, and their ratio;
3. what one identity per client adds to a guarded call (over HTTP, a client of 100 in
   ``PLANGATE_MCP_TOKENS``): the same ``s3.put`` call with a request identity (its run id bound
   to the client, the run's memo read back and compared) against one without (neither), the
   per-client limit on in both; and, in-process, the token lookup among 100 and the limit's
   admission, each per call.

Calls alternate between the two sides of each pair, after warm-ups, on one embedded stack.

    .venv/bin/python -m bench.mcp [--calls 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from temporalio import activity
from temporalio.worker import Worker

from bench._stack import bench_stack
from plangate.client.api import Plangate

GIT_FILE = """\
servers:
  git:
    command: [{python}, -m, mcp_server_git, --repository, {repo}]
    tools:
      git.log:
        tool: git_log
        effect: read
        args:
          repo_path: string
          max_count: {{type: integer, optional: true}}
"""


@activity.defn(name="bench.noop")
async def noop(x: str) -> str:
    """The bare standalone activity: nothing but Temporal's round trip."""
    return x


def scratch_repo(where: Path) -> Path:
    repo = where / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@example"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "README").write_text("bench\n")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    return repo


def stdio(command: list[str], env: dict[str, str]) -> Client:
    return Client(StdioServerParameters(command=command[0], args=command[1:], env=env),
                  read_timeout_seconds=60)


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    began = time.perf_counter()
    await fn()
    return (time.perf_counter() - began) * 1000


async def alternate(calls: int, *fns: Callable[[], Awaitable[Any]]) -> list[float]:
    """p50 (ms) of each of ``fns``, called in turn ``calls`` times each, after 3 warm-ups of
    each."""
    for _ in range(3):
        for fn in fns:
            await fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(calls):
        for fn, ts in zip(fns, times, strict=True):
            ts.append(await timed(fn))
    return [statistics.median(ts) for ts in times]


async def pair(calls: int, a: Callable[[], Awaitable[Any]], b: Callable[[], Awaitable[Any]]
               ) -> tuple[float, float]:
    """p50 (ms) of ``a`` and of ``b``, called alternately ``calls`` times each, after 3
    warm-ups of each."""
    pa, pb = await alternate(calls, a, b)
    return pa, pb


def ok(result: Any, what: str) -> Any:
    if result.is_error:
        raise SystemExit(f"{what} failed: {result.content}")
    return result


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        repo = scratch_repo(Path(tmp))
        servers = Path(tmp) / "mcp.yaml"
        servers.write_text(GIT_FILE.format(python=sys.executable, repo=repo))
        extra = {"PLANGATE_MCP_SERVERS": str(servers)}
        async with bench_stack(env=extra) as b:
            api = Plangate(b.client, b.settings)
            # no limit a minute: every call here is measured, reads counted as runs
            env = {**os.environ, **b.env, **extra, "PLANGATE_MCP_RUNS_PER_MINUTE": "0",
                   "PLANGATE_TASK_QUEUE": b.settings.temporal.task_queue}
            bucket = f"bench-{uuid.uuid4().hex[:8]}"
            boto3.client("s3", endpoint_url=b.settings.world.s3_endpoint_url).create_bucket(
                Bucket=bucket)
            git_cmd = [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]
            plangate_cmd = [sys.executable, "-m", "plangate", "mcp"]
            log_args = {"repo_path": str(repo), "max_count": 1}
            as_runs = {**env, "PLANGATE_MCP_READS": "run"}
            noop_queue = f"bench-noop-{uuid.uuid4().hex[:8]}"
            async with stdio(git_cmd, env) as git, stdio(plangate_cmd, env) as gate, \
                    stdio(plangate_cmd, as_runs) as gate_runs, \
                    Worker(b.client, task_queue=noop_queue, activities=[noop]):
                async def direct() -> None:
                    ok(await git.call_tool("git_log", log_args), "git_log")

                async def bare() -> None:
                    got = await b.client.execute_activity(
                        noop, "x", id=f"bench-noop-{uuid.uuid4().hex}", task_queue=noop_queue,
                        start_to_close_timeout=timedelta(seconds=60))
                    if got != "x":
                        raise SystemExit(f"the bare activity answered {got!r}")

                ran: dict[str, list[str]] = {"worker": [], "run": []}

                def guarded(over: Client, path: str) -> Callable[[], Awaitable[None]]:
                    async def call() -> None:
                        res = ok(await over.call_tool("git_log", log_args), "git.log")
                        out = res.structured_content or {}
                        if out.get("status") != "succeeded":
                            raise SystemExit(f"git.log did not succeed: {out}")
                        ran[path].append(str(out["run_id"]))
                    return call

                g50, r50, d50, b50 = await alternate(calls, guarded(gate, "worker"),
                                                     guarded(gate_runs, "run"), direct, bare)
                # each path is what it says: the worker's reads left no workflow, runs did
                runs = [await b.client.count_workflows(f"WorkflowId = '{i}'")
                        for i in (ran["worker"][-1], ran["run"][-1])]
                if [r.count for r in runs] != [0, 1]:
                    raise SystemExit(f"the paths were not taken: workflows {runs}")

                def put() -> dict[str, Any]:
                    return {"bucket": bucket, "key": f"k-{uuid.uuid4().hex[:8]}",
                            "body": "figures"}

                async def over_mcp() -> None:
                    res = ok(await gate.call_tool("s3_put", put()), "s3.put over MCP")
                    if (res.structured_content or {}).get("status") != "succeeded":
                        raise SystemExit(f"s3.put did not succeed: {res.structured_content}")

                async def over_api() -> None:
                    plan = {"goal": "s3.put called over MCP", "budget": {"replans_max": 0},
                            "steps": [{"n": 1, "tool": "s3.put", "effect": "write",
                                       "args": put()}]}
                    rep = await api.result(await api.start(plan))
                    if rep.status != "succeeded":
                        raise SystemExit(f"s3.put did not succeed: {rep.failure}")

                m50, a50 = await pair(calls, over_mcp, over_api)
            i50, n50 = await identity_pair(calls, env, put)
    micro_us = identity_micro()
    print(f"calls: {calls} of each, alternating, after 3 warm-ups of each")
    print(f"git_log directly on mcp-server-git (stdio):        p50 {d50:8.1f} ms")
    print(f"git.log guarded, read by the worker (no run):      p50 {g50:8.1f} ms")
    print(f"git.log guarded, a one-step run (MCP_READS=run):    p50 {r50:8.1f} ms")
    print(f"a bare standalone activity round trip:              p50 {b50:8.1f} ms")
    print(f"  read by the worker / direct:                       {g50 / d50:8.2f}x")
    goal = (d50 + b50) * 1.2
    print(f"  read by the worker / (direct + bare round trip):   {g50 / (d50 + b50):8.2f}x "
          f"(goal at most 1.20: {g50:.1f} vs {goal:.1f} ms; "
          f"{'met' if g50 <= goal else 'NOT met'})")
    print(f"  one-step run / direct:                             {r50 / d50:8.2f}x")
    print(f"s3.put one-step run through the Python API:         p50 {a50:8.1f} ms")
    print(f"s3.put one-step run over MCP (call to answer):      p50 {m50:8.1f} ms")
    print(f"  over MCP / Python API:                             {m50 / a50:8.2f}x")
    print(f"s3.put over MCP (HTTP), no request identity:        p50 {n50:8.1f} ms")
    print(f"s3.put over MCP (HTTP), request identity checked:   p50 {i50:8.1f} ms")
    print(f"  checked / unchecked:                               {i50 / n50:8.3f}x")
    print(f"token lookup among 100 + limit admission:           {micro_us:8.1f} us a call "
          f"({micro_us / 1000 / n50:.4%} of a call)")


def identity_micro(n: int = 20_000) -> float:
    """Microseconds a call spends finding its client among 100 tokens and being admitted
    under the limit."""
    from plangate.mcp.clients import Clients, StartLimit

    callers = [(f"c{i}", secrets.token_urlsafe(32)) for i in range(100)]
    clients = Clients.over_http(
        {"PLANGATE_MCP_TOKENS": ",".join(f"{c}:{t}" for c, t in callers)}, None)
    limit = StartLimit(10**9)
    token = callers[-1][1]
    began = time.perf_counter()
    for _ in range(n):
        who = clients.of_token(token)
        assert who is not None
        limit.admit(who)
    return (time.perf_counter() - began) / n * 1e6


async def identity_pair(calls: int, env: dict[str, str], put: Callable[[], dict[str, Any]]
                        ) -> tuple[float, float]:
    """p50 (ms) of a guarded ``s3.put`` over HTTP with a request identity, and without."""
    from mcp.client.streamable_http import streamable_http_client

    callers = [(f"c{i}", secrets.token_urlsafe(32)) for i in range(100)]
    tokens = ",".join(f"{c}:{t}" for c, t in callers)
    proc = await asyncio.to_thread(
        subprocess.Popen,
        [sys.executable, "-m", "plangate", "mcp", "--http", "--port", "0"],
        env={**env, "PLANGATE_MCP_TOKENS": tokens, "PLANGATE_MCP_RUNS_PER_MINUTE": "100000"},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = await asyncio.to_thread(proc.stdout.readline)
        url = line.split(": ", 1)[1].strip()
        headers = {"Authorization": f"Bearer {callers[-1][1]}"}
        transport = streamable_http_client(
            url, http_client=httpx2.AsyncClient(headers=headers, timeout=60))
        async with Client(transport, read_timeout_seconds=60) as gate:
            async def call(meta: Any) -> None:
                res = ok(await gate.call_tool("s3_put", put(), meta=meta), "s3_put")
                if (res.structured_content or {}).get("status") != "succeeded":
                    raise SystemExit(f"s3.put did not succeed: {res.structured_content}")

            async def checked() -> None:
                await call({"io.plangate/request-id": uuid.uuid4().hex})

            async def unchecked() -> None:
                await call(None)

            return await pair(calls, checked, unchecked)
    finally:
        proc.terminate()
        await asyncio.to_thread(proc.wait, 10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30)
    asyncio.run(main(parser.parse_args().calls))
