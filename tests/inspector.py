"""The MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``, pinned in tests/node) as a
user runs it: ``mcp-inspector --cli --format json ...``, a process of its own, on ``plangate
mcp`` over stdio (the Inspector launches the server, with only the environment it is given)
or over streamable HTTP (a running ``plangate mcp --http``, its bearer token in a header).

Its answers are read from what it prints (one JSON object on stdout); its exit code says
whether it took the server's answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BIN = Path(__file__).parent / "node" / "node_modules" / ".bin" / "mcp-inspector"
TIMEOUT_S = 120  # generous: node and a stdio server start per call, beside a second suite


def stdio_env(stack: Any, task_queue: str) -> dict[str, str]:
    """What the Inspector hands a stdio server (it passes on no variable of its own but
    HOME, PATH and the like): the stack, the demo systems, the test's queue. No approver key:
    the server needs none."""
    return {**stack.env(), "PLANGATE_DEMO_SYSTEMS": "1", "PLANGATE_TASK_QUEUE": task_queue,
            "TEMPORAL_CONFIG_FILE": os.devnull}


@dataclass(frozen=True)
class Answer:
    """What one run of the Inspector printed, and how it exited."""

    returncode: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        assert self.returncode == 0, f"inspector exit {self.returncode}: {self.err}{self.out}"
        got: dict[str, Any] = json.loads(self.out)
        return got


@dataclass(frozen=True)
class Inspector:
    """The Inspector on one server (``target``: the stdio command, or the HTTP options) and one
    protocol era (``legacy``: the 2025-11-25 handshake; ``modern``: 2026-07-28)."""

    target: tuple[str, ...]
    era: str
    home: Path

    @classmethod
    def stdio(cls, env: Mapping[str, str], era: str, home: Path) -> Inspector:
        pairs = [a for k, v in sorted(env.items()) for a in ("-e", f"{k}={v}")]
        return cls((*pairs, "--", sys.executable, "-m", "plangate", "mcp"), era, home)

    @classmethod
    def stdio_recorded(cls, env: Mapping[str, str], era: str, home: Path, wire: Path
                       ) -> Inspector:
        """As ``stdio``, the server's answers also appended to ``wire`` (``tee``): what the
        Inspector was told, read while it still runs."""
        pairs = [a for k, v in sorted(env.items()) for a in ("-e", f"{k}={v}")]
        line = f"{shlex.quote(sys.executable)} -m plangate mcp | tee -a {shlex.quote(str(wire))}"
        return cls((*pairs, "--", "sh", "-c", line), era, home)

    @classmethod
    def http(cls, url: str, token: str, era: str, home: Path) -> Inspector:
        return cls(("--transport", "http", "--server-url", url,
                    "--header", f"Authorization: Bearer {token}"), era, home)

    def argv(self, method: str, *options: str) -> list[str]:
        # the target's command last: after "--" nothing is an option of the Inspector's
        cmd = [str(BIN), "--cli", "--format", "json", "--protocol-era", self.era,
               "--method", method, *options]
        if "--" in self.target:
            cut = self.target.index("--")
            return [*cmd, *self.target[:cut], *self.target[cut:]]
        return [*cmd, *self.target]

    def _env(self) -> dict[str, str]:
        # its catalogue, stored OAuth and client config in the test's own directory
        return {"PATH": os.environ.get("PATH", ""), "HOME": str(self.home),
                "MCP_CATALOG_PATH": str(self.home / "mcp.json"),
                "MCP_CLIENT_CONFIG_PATH": str(self.home / "client.json"),
                "MCP_STORAGE_DIR": str(self.home / "storage"), "NO_COLOR": "1"}

    async def spawn(self, method: str, *options: str) -> asyncio.subprocess.Process:
        assert BIN.exists(), f"{BIN} missing: install the npm peers (scripts/_node.sh)"
        return await asyncio.create_subprocess_exec(
            *self.argv(method, *options), env=self._env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    @staticmethod
    async def finish(proc: asyncio.subprocess.Process) -> Answer:
        try:
            out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT_S)
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        assert proc.returncode is not None
        return Answer(proc.returncode, out.decode(), err.decode())

    async def run(self, method: str, *options: str) -> Answer:
        return await self.finish(await self.spawn(method, *options))

    async def tools(self) -> dict[str, dict[str, Any]]:
        listed = (await self.run("tools/list")).json()
        return {t["name"]: t for t in listed["result"]["tools"]}

    async def call(self, tool: str, args: Mapping[str, Any], request_id: str | None = None
                   ) -> Answer:
        return await self.run("tools/call", *self.call_options(tool, args, request_id))

    @staticmethod
    def call_options(tool: str, args: Mapping[str, Any], request_id: str | None) -> list[str]:
        opts = ["--tool-name", tool, "--tool-args-json", json.dumps(dict(args))]
        if request_id is not None:
            opts += ["--tool-metadata", f"io.plangate/request-id={request_id}"]
        return opts

    @contextlib.asynccontextmanager
    async def calling(self, tool: str, args: Mapping[str, Any], request_id: str | None = None
                      ) -> AsyncIterator[asyncio.subprocess.Process]:
        """A call left running (the Inspector may wait on a task); killed if not finished."""
        proc = await self.spawn("tools/call", *self.call_options(tool, args, request_id))
        try:
            yield proc
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
