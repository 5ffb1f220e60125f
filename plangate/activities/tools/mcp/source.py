"""The MCP servers file as a tool source: :func:`read` gives its tools and probes, which
``activities.extensions`` adds to a deployment's registry when ``PLANGATE_MCP_SERVERS`` names
the file (so the worker, ``plangate check`` and the re-planner see them like any other); and the
check a worker makes at start, connected: every tool and probe the file declares is one its
server lists, and a probe's read tool is not one the server itself says changes anything."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plangate.activities.tools.mcp.file import McpFile, ServerDecl, load
from plangate.activities.tools.mcp.probes import probe_spec
from plangate.activities.tools.mcp.sessions import McpServers, ServerAddress, ServerDown
from plangate.activities.tools.mcp.tools import tool_spec
from plangate.activities.tools.registry import ToolSpec
from plangate.plans.words import many
from plangate.probes.registry import ProbeSpec

if TYPE_CHECKING:
    from plangate.world.clients import World

log = logging.getLogger(__name__)


class ServersRefused(Exception):
    """A server does not offer what the file declares on it."""


def address(name: str, s: ServerDecl) -> ServerAddress:
    return ServerAddress(name, tuple(s.command or ()), s.url, tuple(sorted(s.env.items())),
                         s.timeout_s)


@dataclass(frozen=True)
class Source:
    """What the file gives a deployment: its tools and probes, and the check a worker makes at
    start, connected (:func:`offered`)."""

    tools: dict[str, ToolSpec[Any]]
    probes: dict[str, ProbeSpec[Any]]
    file: McpFile
    servers: McpServers

    async def check(self, world: World) -> list[str]:
        return await offered(self.file, self.servers, world)


def read(path: str, known_probes: Mapping[str, Any]) -> Source:
    """The file at ``path`` as a source of tools and probes, checked against itself and the
    deployment's other probes ``known_probes`` (``McpFileError``)."""
    f = load(path, known_probes)
    servers = McpServers(path, {n: address(n, s) for n, s in f.servers.items()})
    tools = {name: tool_spec(servers, server, name, t) for server, name, t in f.tools()}
    probes = {name: probe_spec(servers, server, name, p) for server, name, p in f.probes()}
    return Source(tools, probes, f, servers)


async def offered(f: McpFile, servers: McpServers, world: World) -> list[str]:
    """Every server tool the file names is listed by its server (else ``ServersRefused``,
    naming them). A server that does not answer now is left to the runs: its steps wait.
    A line per server saying what it lists (``plangate worker`` logs them, ``--check`` prints
    them)."""
    sessions = servers.on(world)
    lines: list[str] = []
    for name, s in f.servers.items():
        where = servers.addresses[name].where
        try:
            listed = await sessions.list_tools(name)
        except ServerDown as e:
            log.warning("MCP server %s did not answer at start (%s); its steps wait for it",
                        name, e)
            lines.append(f"MCP server {name} ({where}) did not answer ({e}): its steps will "
                         "wait for it")
            continue
        wanted = {t.tool for t in s.tools.values()} | {p.tool for p in s.probes.values()}
        missing = sorted(wanted - set(listed))
        if missing:
            raise ServersRefused(
                f"MCP server {name} ({servers.addresses[name].where}) does not list "
                f"{', '.join(missing)}, which {servers.key} declares on it "
                f"(it lists: {', '.join(sorted(listed)) or 'nothing'})"
            )
        writers = sorted(f"{probe} ({p.tool})" for probe, p in s.probes.items()
                         if listed[p.tool].read_only is False)
        if writers:
            raise ServersRefused(
                f"MCP server {name} says the read tool of probe(s) {', '.join(writers)} is not "
                "read-only: a probe only reads"
            )
        used = ", ".join(f"{t} ({d.tool})" for t, d in s.tools.items())
        lines.append(f"MCP server {name} ({where}) lists {many(len(listed), 'tool')}: "
                     f"{', '.join(sorted(listed))}; guarded here: {used or 'none'}")
    return lines
