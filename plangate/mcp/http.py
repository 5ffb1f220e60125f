"""``plangate mcp --http``: the same server over streamable HTTP, access decided before anything
is bound, as the codec server decides it:

- with ``PLANGATE_MCP_TOKENS`` (a client name and submitter key per token) or
  ``PLANGATE_MCP_TOKEN`` (one client) set, tokens of real entropy (``plangate.servers.tokens``),
  every request must carry ``Authorization: Bearer <token>`` (401 otherwise, compared in
  constant time), on any address, and acts as the client its token names
  (``plangate.mcp.clients``): per request, so a session id another client learnt acts as
  that other client, never as the session's first;
- with ``PLANGATE_MCP_OAUTH_ISSUER`` (and its resource and clients) set, an OAuth 2.1 resource
  server instead: every request carries a JWT of that issuer for this server, acting as the
  client the deployment lists for it (``plangate.mcp.oauth``);
- without one, only a loopback address, and only when told so (``--insecure-local``): every
  process that reaches the server is one client.

On a loopback address the SDK's DNS-rebinding protection is on (Host and Origin checked). The
log carries the request line and status, never a header (the token)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Mapping
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from plangate.errors import ConfigurationError
from plangate.mcp.clients import CLIENT_SCOPE, TOKEN_VAR, TOKENS_VAR, Clients
from plangate.servers.tokens import access_refusal
from plangate.world.settings import Settings

PATH = "/mcp"


class McpServerRefused(ConfigurationError):
    """``plangate mcp --http`` will not start as asked: one line saying why and what to do."""


def refusal(token: str | None, host: str, insecure_local: bool) -> str | None:
    """Why an MCP server on ``host`` must not start, or None."""
    return access_refusal("mcp", TOKEN_VAR, token, host, insecure_local, "start guarded runs")


class BearerOnly:
    """Refuses (401) every HTTP request that does not carry a client's bearer token; the
    others go on as that client (``scope[CLIENT_SCOPE]``, read by ``server.caller_of``)."""

    def __init__(self, app: ASGIApp, clients: Clients) -> None:
        self.app = app
        self.clients = clients

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            scheme, _, token = given.decode("latin-1").partition(" ")
            who = self.clients.of_token(token) if scheme == "Bearer" and token else None
            if who is not None:
                scope[CLIENT_SCOPE] = who
            else:
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


def clients_of(settings: Settings, env: Mapping[str, str], host: str, insecure_local: bool
               ) -> Clients:
    """Who may call a server on ``host``: its token map, or refused (``McpServerRefused``)."""
    try:
        clients = Clients.over_http(env, settings.identity.submitter_key)
    except ConfigurationError as e:
        raise McpServerRefused(f"mcp: {e}") from None
    if not clients.guarded:
        why = refusal(None, host, insecure_local)
        if why is not None:
            raise McpServerRefused(why.replace(TOKEN_VAR, TOKENS_VAR))
    return clients


async def serve_http(
    settings: Settings, *, host: str, port: int, clients: Clients, **options: Any,
) -> None:
    """Serve ``clients`` (``clients_of``) until stopped; prints ``plangate mcp:
    http://HOST:PORT/mcp`` once listening."""
    import uvicorn

    from plangate.mcp.server import build_server

    app: ASGIApp = build_server(settings, clients=clients, **options).streamable_http_app(
        streamable_http_path=PATH, host=host
    )
    if clients.oauth is not None:
        from plangate.mcp.oauth.guard import OAuthGuard

        app = OAuthGuard(app, clients.oauth)
    elif clients.tokens:
        app = BearerOnly(app, clients)
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    print(f"plangate mcp: http://{shown}:{sock.getsockname()[1]}{PATH}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])
    sys.stdout.flush()
