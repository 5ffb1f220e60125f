"""What ``plangate mcp`` says on stderr as it starts (stdout is the protocol's over stdio):
where its runs go (Temporal's address and namespace, the task queue, each marked where it is
plangate's default) and how it tells its clients apart. An MCP client launches the server with
the environment it chooses, often a minimal one: this line is how its user learns that the
server got the defaults. Names only, never a key or a token. Imports no MCP SDK, so the line
can be written before the SDK is known to be there."""

from __future__ import annotations

from plangate.world.settings import APPROVER_KEY_VAR, SUBMITTER_KEY_VAR, Settings
from plangate.world.settings.temporal import TemporalSettings

# the top-level modules the ``mcp`` extra brings (the SDK and what it serves HTTP with)
EXTRA_MODULES = frozenset({
    "mcp", "mcp_types", "starlette", "sse_starlette", "uvicorn", "multipart",
    "python_multipart", "jwt", "jsonschema", "httpx2", "anyio",
})
# how clients are told apart over stdio (over HTTP: ``mcp.clients.Clients.scheme``)
STDIO = "stdio: one client, the server's own submitter key"


def of_the_extra(e: ModuleNotFoundError) -> bool:
    """Whether ``e`` is a module of the ``mcp`` extra missing (else a bug, raised as is)."""
    return (e.name or "").split(".", 1)[0] in EXTRA_MODULES


def _value(value: str, default: str) -> str:
    return f"{value} (the default)" if value == default else value


def startup_line(settings: Settings, identity: str) -> str:
    """``plangate mcp: Temporal ADDRESS, namespace NS, task queue Q; clients: IDENTITY``;
    over stdio, the submitter key's name (or that there is none)."""
    t, d = settings.temporal, TemporalSettings()
    if identity == STDIO:
        key = settings.identity.submitter_key
        identity += f" ({key.name})" if key else f" (none: {SUBMITTER_KEY_VAR} unset)"
    return (
        f"plangate mcp: Temporal {_value(t.address, d.address)}, "
        f"namespace {_value(t.namespace, d.namespace)}, "
        f"task queue {_value(t.task_queue, d.task_queue)}; clients: {identity}"
    )


def approver_warning(settings: Settings) -> str | None:
    """A line when the server was handed an approver's key (the pasted dev exports carry one):
    it never uses it, and a server's environment is no place for it."""
    if not settings.identity.approver_keys:
        return None
    return (
        f"plangate mcp: warning: {APPROVER_KEY_VAR} is set in this server's environment; an MCP "
        "server never approves: give its client an env without it"
    )
