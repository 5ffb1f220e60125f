"""Reaching the configured services, with one clear line when one cannot be reached.

The command line connects to Temporal through :func:`connect` (the deployment's connection from
``temporalio.envconfig``: a profile, TLS, an API key); the worker also checks Postgres
and (when ``PLANGATE_S3_ENDPOINT_URL`` is set) S3 before it polls, so a worker that could do no
work says which service is missing, by host and port, and exits. Messages never carry a
password.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from urllib.parse import urlsplit

from temporalio.client import Client
from temporalio.service import RPCError

from plangate.client.connection import connect as _connect
from plangate.errors import ServiceUnreachable
from plangate.world.settings import Settings, TemporalSettings, WorldSettings

CONNECT_TIMEOUT_S = 3.0


def _reason(e: BaseException, secret: str | None = None) -> str:
    """The cause in a few words: the OS's own where there is one."""
    if isinstance(e, OSError) and e.errno:
        return os.strerror(e.errno)
    text = str(e)
    # the Rust core's transport errors end in the OS's own words
    os_message = re.search(r'message: "([^"]+)"', text)
    if os_message:
        text = os_message.group(1)
    # libpq: 'connection failed: connection to server at "h", port 1 failed: <cause>\n<hint>'
    text = text.strip().split("\n", 1)[0].rsplit(" failed: ", 1)[-1]
    text = " ".join(text.split()) or type(e).__name__
    if secret:
        text = text.replace(secret, "***")
    return text[:300]


def temporal_address(temporal: TemporalSettings) -> str:
    """Where the client connects: the address, and ``over TLS`` when it does."""
    return temporal.address + (" over TLS" if temporal.tls_enabled else "")


# a shell without the exports ``plangate dev`` prints: what to do, said where it shows
DEV_EXPORTS = "start `plangate dev` and paste the export lines it prints"


def _temporal_origin(temporal: TemporalSettings) -> tuple[str, str]:
    """Where the address came from, and what to do when nothing answers there."""
    if not temporal.address_from:
        return ("the default: no TEMPORAL_ADDRESS, no Temporal profile",
                f"To use plangate's own services, {DEV_EXPORTS}; else set TEMPORAL_ADDRESS "
                "(docs/configuration.md)")
    return (temporal.address_from,
            "Start Temporal there, or set TEMPORAL_ADDRESS to where it listens (for "
            "`plangate dev`, paste the export lines it printed into this shell)")


async def connect(settings: Settings, *, serve_metrics: bool = False) -> Client:
    """``plangate.client.connection.connect``, with a service that cannot be reached (or that
    refuses the credentials) as one line naming it, where its address came from and what to
    do. The API key never appears in it. Connected to plangate's default address, configured
    nowhere (a shell without ``plangate dev``'s exports): a line on stderr says so, as the
    address it talks to may be any server's."""
    temporal = settings.temporal
    try:
        client = await _connect(settings, serve_metrics=serve_metrics)
    except (RuntimeError, RPCError) as e:
        origin, todo = _temporal_origin(temporal)
        raise ServiceUnreachable(
            "Temporal", temporal_address(temporal), _reason(e, temporal.api_key), origin, todo
        ) from None
    if not temporal.address_from:
        print(f"plangate: using Temporal at {temporal.address}, the default (no "
              "TEMPORAL_ADDRESS, no Temporal profile); set TEMPORAL_ADDRESS to choose, or "
              "for `plangate dev`'s own, paste the export lines it printed", file=sys.stderr)
    return client


def postgres_address(url: str) -> str:
    """``host:port`` of a libpq URL or conninfo string (never the password)."""
    import psycopg  # here: the commands that reach no Postgres do not load it (70 ms)
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(an unparsable PLANGATE_DATABASE_URL)"
    host = str(info.get("host") or "localhost")
    return f"{host}:{info.get('port') or 5432}"


async def check_postgres(world: WorldSettings) -> None:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    url = world.database_url
    try:
        secret = conninfo_to_dict(url).get("password")
    except psycopg.ProgrammingError:
        secret = None
    try:
        conn = await psycopg.AsyncConnection.connect(
            url, connect_timeout=int(CONNECT_TIMEOUT_S), autocommit=True
        )
    except psycopg.Error as e:
        where = postgres_address(url)
        origin, todo = _postgres_origin(world)
        raise ServiceUnreachable(
            "Postgres", where, _reason(e, str(secret) if secret else None), origin, todo
        ) from None
    await conn.close()


def _postgres_origin(world: WorldSettings) -> tuple[str, str]:
    if world.database_url == WorldSettings.database_url:
        return ("the default: PLANGATE_DATABASE_URL names no other",
                f"To use plangate's own services, {DEV_EXPORTS}; else set "
                "PLANGATE_DATABASE_URL (docs/configuration.md)")
    return ("PLANGATE_DATABASE_URL",
            "Start Postgres there, or set PLANGATE_DATABASE_URL to where it listens (for "
            "`plangate dev`, paste the export lines it printed into this shell)")


def s3_address(endpoint_url: str) -> tuple[str, int]:
    parts = urlsplit(endpoint_url)
    default = 443 if parts.scheme == "https" else 80
    try:
        port = parts.port or default
    except ValueError:
        port = default
    return parts.hostname or "", port


async def check_s3(world: WorldSettings) -> None:
    """A configured S3 endpoint accepts connections (AWS itself, unset, is not checked here:
    credentials decide there, and the first probe says so)."""
    if not world.s3_endpoint_url:
        return
    host, port = s3_address(world.s3_endpoint_url)
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port), CONNECT_TIMEOUT_S
        )
    except TimeoutError:
        raise ServiceUnreachable(
            "S3", f"{host}:{port}", f"no answer in {CONNECT_TIMEOUT_S:g} s"
        ) from None
    except OSError as e:
        raise ServiceUnreachable("S3", f"{host}:{port}", _reason(e)) from None
    writer.close()
    await writer.wait_closed()
    # something listens there: it must answer as S3 does (any port accepts a connection)
    why = await asyncio.to_thread(_not_s3, world.s3_endpoint_url)
    if why is not None:
        raise ServiceUnreachable("S3", f"{host}:{port}", why)


def _not_s3(endpoint_url: str) -> str | None:
    """Why what answers at ``endpoint_url`` is not S3, or None: a ListBuckets that S3 answers
    with its buckets, or refuses with an S3 error code (credentials are the first probe's to
    judge), is S3; a closed connection, a non-HTTP answer or an HTTP answer that is not S3's
    XML is not."""
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    # unsigned: whether it is S3 needs no credentials (S3 refuses with AccessDenied, in XML)
    config = Config(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=CONNECT_TIMEOUT_S,
                    retries={"max_attempts": 1}, signature_version=UNSIGNED)
    try:
        boto3.client("s3", endpoint_url=endpoint_url, config=config).list_buckets()
    except ClientError as e:
        code = str(e.response.get("Error", {}).get("Code", ""))
        if code and not code.isdigit():  # S3's own error document, parsed
            return None
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return f"an HTTP answer (status {status}) that is not S3's"
    except (BotoCoreError, Exception) as e:  # a parser's or a socket's failure: no S3 at all
        return f"no S3 answer: {type(e).__name__}"
    return None


async def check_worker_services(settings: Settings) -> Client:
    """What a worker needs, in order: Temporal, Postgres, S3. The first missing one raises.
    The client serves the worker's metrics (``PLANGATE_METRICS_ADDRESS``)."""
    client = await connect(settings, serve_metrics=True)
    await check_postgres(settings.world)
    await check_s3(settings.world)
    return client
