"""The commands that serve people and tools over HTTP: ``ui`` (the approval page),
``codec-server`` (decrypting payloads for the Temporal Web UI) and ``mcp`` (plans and the
catalogue's tools, guarded, to an MCP client). An address one cannot listen on is one line
naming it, exit 2 (:func:`listening`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from plangate.cli.command import EXIT_OK, Command, UsageError, api, index_world
from plangate.errors import ConfigurationError
from plangate.world.settings import Settings


@contextmanager
def listening(command: str, host: str, port: int) -> Iterator[None]:
    """A server of ``command`` that cannot listen on ``host:port`` (in use, not this
    machine's address, a port it may not take) as bad usage, in the OS's own words."""
    try:
        yield
    except OSError as e:
        why = e.strerror or str(e) or type(e).__name__
        raise UsageError(f"{command}: cannot listen on {host}:{port}: {why}") from None


def port(text: str) -> int:
    """A ``--port``: a number from 0 (any free one) to 65535, refused by argparse otherwise
    (one usage line, exit 2; a port past 65535 reached the socket as an OverflowError)."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 0 to 65535, not {text!r}")
    return n


def _ui_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=port, default=8765, help="the port (default 8765; 0: any free)")
    p.add_argument("--temporal-ui", metavar="URL",
                   help="the Temporal Web UI's address, for each run's link (default: "
                        "PLANGATE_TEMPORAL_UI, else the dev server's http://localhost:8233)")


async def _ui(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.servers.notify.settings import chat_approvers_held
    from plangate.servers.page import (
        DEFAULT_TEMPORAL_UI,
        TEMPORAL_UI_VAR,
        run_ui,
        temporal_ui_arg,
        ui_keys,
        ui_options,
    )

    try:
        keys = ui_keys(settings.identity)  # before connecting: nobody to let in, no page
        temporal_ui = temporal_ui_arg(
            args.temporal_ui or os.environ.get(TEMPORAL_UI_VAR) or DEFAULT_TEMPORAL_UI)
        options = ui_options(os.environ)  # the page extra installed; a session's length
        if options.chat is not None:
            chat_approvers_held(options.chat, frozenset(k.name for k in keys))
    except ValueError as e:
        raise UsageError(str(e)) from None
    plangate = await api(settings)
    plangate.index = await index_world(settings)  # the card list from the runs index
    if plangate.index is None and options.notify is not None:
        from plangate.world.clients import World

        # the notices need it: their loop says so while it does not answer, and goes on
        plangate.index = World(settings.world)
    try:
        with listening("ui", args.host, args.port):
            return await run_ui(plangate, keys, args.host, args.port, temporal_ui, options)
    finally:
        if plangate.index is not None:
            await plangate.index.close()


UI = Command(
    "ui", help="serve the approval page: pending cards across runs, with approve and reject "
    "(for the approvers whose keys PLANGATE_APPROVER_KEY names)",
    description="Serve the approval page: the cards waiting across runs, answered by the "
                "approvers whose keys PLANGATE_APPROVER_KEY names.",
    run=_ui, arguments=_ui_arguments,
)


def _codec_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on "
                   "(default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=port, default=8081, help="the port (default 8081)")
    p.add_argument("--origin", action="append", metavar="URL",
                   help="the Web UI's origin, allowed by CORS (repeatable; default: "
                   "localhost and 127.0.0.1, ports 8080 and 8233)")
    p.add_argument("--insecure-local", action="store_true",
                   help="serve without PLANGATE_CODEC_TOKEN: only on a loopback --host, where "
                   "every process of this machine may decrypt")


async def _codec_server(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.servers.codec import (
        DEFAULT_ORIGINS,
        CodecServerRefused,
        codec_server,
        describe,
    )

    origins = args.origin or DEFAULT_ORIGINS
    try:
        with listening("codec-server", args.host, args.port):
            server = codec_server(settings.encryption, host=args.host, port=args.port,
                                  origins=origins, insecure_local=args.insecure_local)
    except CodecServerRefused as e:
        raise UsageError(str(e)) from None
    print(describe(server, settings.encryption), flush=True)
    try:
        await asyncio.to_thread(server.serve_forever)
    finally:  # Ctrl-C cancels the wait: stop the server's loop, so its thread ends too
        server.shutdown()
        server.server_close()
    return EXIT_OK


CODEC_SERVER = Command(
    "codec-server", help="decrypt payloads for the Temporal Web UI (its remote codec endpoint)",
    description="Serve the remote codec endpoint that decrypts payloads for the Temporal Web "
                "UI and CLI.",
    run=_codec_server, arguments=_codec_arguments,
)


def _mcp_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--http", action="store_true",
                   help="serve streamable HTTP at /mcp instead of stdio (PLANGATE_MCP_TOKENS: "
                        "a bearer token per client; PLANGATE_MCP_TOKEN: one; "
                        "PLANGATE_MCP_OAUTH_ISSUER: OAuth 2.1 tokens of that issuer)")
    p.add_argument("--host", default="127.0.0.1",
                   help="with --http: the address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=port, default=8766,
                   help="with --http: the port (default 8766; 0: any free)")
    p.add_argument("--insecure-local", action="store_true",
                   help="with --http and no token: serve a loopback address "
                        "without a token")
    p.add_argument("--answer-within", type=float, default=10.0, metavar="SECONDS",
                   help="how long a guarded call may take before it is answered as a task "
                        "(or with its run id and state), in seconds; default 10")
    p.add_argument("--approval-url", default="http://127.0.0.1:8765/", metavar="URL",
                   help="the approval page a waiting card points a person at "
                        "(default: plangate ui's address)")


async def _mcp(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.mcp import startup

    try:
        from plangate.mcp.clients import runs_per_minute
        from plangate.mcp.http import McpServerRefused, clients_of, serve_http
        from plangate.mcp.reads import reads_by_worker
        from plangate.mcp.server import serve_stdio

        if args.http:
            import uvicorn  # noqa: F401  (loaded by serve_http: missing, say so now)
    except ModuleNotFoundError as e:
        if not startup.of_the_extra(e):
            raise
        raise UsageError(
            f"mcp: the MCP SDK is not installed ({e.name} is missing): "
            "pip install 'plangate[mcp]'"
        ) from None
    if args.answer_within <= 0:
        raise UsageError("mcp: --answer-within must be a positive number of seconds")
    try:
        per_minute = runs_per_minute(os.environ)
        by_worker = reads_by_worker(os.environ)
    except ConfigurationError as e:
        raise UsageError(f"mcp: {e}") from None
    options = {"answer_within_s": args.answer_within, "approval_url": args.approval_url,
               "runs_per_minute": per_minute, "reads_by_worker": by_worker}
    warning = startup.approver_warning(settings)
    if not args.http:
        # stderr: stdout carries the protocol, nothing else
        print(startup.startup_line(settings, startup.STDIO), file=sys.stderr, flush=True)
        if warning:
            print(warning, file=sys.stderr, flush=True)
        await serve_stdio(settings, **options)
        return EXIT_OK
    try:  # refused: no line of a server
        clients = clients_of(settings, os.environ, args.host, args.insecure_local)
    except McpServerRefused as e:
        raise UsageError(str(e)) from None
    print(startup.startup_line(settings, clients.scheme), file=sys.stderr, flush=True)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    try:
        with listening("mcp", args.host, args.port):
            await serve_http(settings, host=args.host, port=args.port, clients=clients,
                             **options)
    except McpServerRefused as e:
        raise UsageError(str(e)) from None
    return EXIT_OK


MCP = Command(
    "mcp", help="serve the plan tools (check, run, report, cancel), the catalogue and every tool "
    "of it, guarded, to an MCP client over stdio or streamable HTTP; no tool approves",
    description="Serve plans and every tool of the catalogue, guarded, to an MCP client over "
                "stdio or streamable HTTP. No tool approves.",
    run=_mcp, arguments=_mcp_arguments,
)
