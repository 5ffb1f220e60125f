"""``plangate mcp --http``: the same server over streamable HTTP, access decided before anything
is bound, as the codec server decides it:

- with ``PLANGATE_MCP_TOKEN`` set (a token of real entropy, ``plangate.servers.tokens``),
  every request must carry ``Authorization: Bearer <token>`` (401 otherwise, compared in
  constant time), on any address;
- without one, only a loopback address, and only when told so (``--insecure-local``): anyone
  who reaches the server can start guarded runs and read reports.

On a loopback address the SDK's DNS-rebinding protection is on (Host and Origin checked). The
log carries the request line and status, never a header (the token)."""

from __future__ import annotations

import hmac
import socket
import sys
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from plangate.errors import ConfigurationError
from plangate.servers.tokens import access_refusal
from plangate.world.settings import Settings

TOKEN_VAR = "PLANGATE_MCP_TOKEN"
PATH = "/mcp"


class McpServerRefused(ConfigurationError):
    """``plangate mcp --http`` will not start as asked: one line saying why and what to do."""


def refusal(token: str | None, host: str, insecure_local: bool) -> str | None:
    """Why an MCP server on ``host`` must not start, or None."""
    return access_refusal("mcp", TOKEN_VAR, token, host, insecure_local, "start guarded runs")


class BearerOnly:
    """Refuses (401) every HTTP request that does not carry the bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"text/plain"),
                    (b"www-authenticate", b'Bearer realm="plangate"')]})
                await send({"type": "http.response.body",
                            "body": b"a bearer token is required\n"})
                return
        await self.app(scope, receive, send)


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve_http(
    settings: Settings, *, host: str, port: int, token: str | None, insecure_local: bool,
    **options: Any,
) -> None:
    """Serve until stopped; prints ``plangate mcp: http://HOST:PORT/mcp`` once listening."""
    import uvicorn

    from plangate.mcp.server import build_server

    why = refusal(token, host, insecure_local)
    if why is not None:
        raise McpServerRefused(why)
    app: ASGIApp = build_server(settings, **options).streamable_http_app(
        streamable_http_path=PATH, host=host
    )
    if token is not None:
        app = BearerOnly(app, token)
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    print(f"plangate mcp: http://{shown}:{sock.getsockname()[1]}{PATH}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])
    sys.stdout.flush()
