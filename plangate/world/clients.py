"""Clients for the systems tools and probes touch, built once per worker from its
``WorldSettings``."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry.trace import Tracer
from psycopg import AsyncConnection, sql
from psycopg_pool import AsyncConnectionPool

from plangate.world.files import LocalFiles, SharedFiles
from plangate.world.runfiles import Files
from plangate.world.settings import WorldSettings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# Temporal owns retries: the clients fail fast and say so.
# S3: connect in 3 s, read in 20, one attempt (boto3 loaded with the first S3 call: 0.2 s that
# a process reading Postgres alone, ``plangate report`` or ``ledger``, need not pay)
_S3_CONFIG: dict[str, Any] = {"connect_timeout": 3, "read_timeout": 20,
                              "retries": {"max_attempts": 1}}
PG_CONNECT_TIMEOUT_S = 3.0
# A transaction of the worker's that goes quiet this long is ended by Postgres. A worker paused
# in the middle of one (a GC pause, a VM migration, SIGSTOP) would otherwise hold its locks until
# it woke, and the retry on another worker (after the tool's heartbeat timeout, 30 s unless
# PLANGATE_TOOL_HEARTBEAT_TIMEOUT says otherwise), or that worker's start (the schema's DDL),
# would wait behind them. Well inside the default heartbeat timeout; no tool waits between
# statements (a load reads its file before its transaction).
PG_IDLE_IN_TRANSACTION = "10s"

C = TypeVar("C")


async def _configure(conn: AsyncConnection[Any]) -> None:
    """Each new pooled connection, once (autocommit: a setting of the session)."""
    await conn.execute(
        sql.SQL("SET idle_in_transaction_session_timeout = {}").format(
            sql.Literal(PG_IDLE_IN_TRANSACTION)
        )
    )


class World:
    def __init__(self, settings: WorldSettings) -> None:
        self.settings = settings
        self.workdir = settings.workdir
        self._s3: S3Client | None = None
        self._pool: AsyncConnectionPool[Any] | None = None
        self._pool_lock = asyncio.Lock()
        self._kept: dict[str, Any] = {}
        self.tracer: Tracer | None = None  # plangate.worker.tracing sets it when tracing is on
        self.files: Files = LocalFiles(self.workdir)
        if settings.artifacts_bucket is not None:
            self.files = SharedFiles(
                self.workdir, lambda: self.s3, settings.artifacts_bucket,
                settings.artifacts_prefix,
            )

    @property
    def s3(self) -> S3Client:
        if self._s3 is None:
            import boto3
            from botocore.config import Config

            self._s3 = boto3.client(
                "s3", endpoint_url=self.settings.s3_endpoint_url, config=Config(**_S3_CONFIG)
            )
        return self._s3

    async def pool(self) -> AsyncConnectionPool[Any]:
        async with self._pool_lock:
            if self._pool is None:
                pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                    self.settings.database_url,
                    min_size=1,
                    max_size=8,
                    open=False,
                    timeout=PG_CONNECT_TIMEOUT_S,
                    kwargs={"autocommit": True, "connect_timeout": int(PG_CONNECT_TIMEOUT_S)},
                    configure=_configure,
                )
                await pool.open(wait=False)
                self._pool = pool
            return self._pool

    def client(self, name: str, make: Callable[[], C]) -> C:
        """An extension's own client (an HTTP client, a vendor's SDK) under ``name``: made by
        ``make`` on first use, then the same one for every tool and probe call of this world
        (one per worker), and closed with it (its ``aclose()``, else its ``close()``)."""
        if name not in self._kept:
            self._kept[name] = make()
        kept: C = self._kept[name]
        return kept

    async def close(self) -> None:
        kept, self._kept = list(self._kept.values()), {}
        for c in kept:
            closing = getattr(c, "aclose", None) or getattr(c, "close", None)
            done = closing() if callable(closing) else None
            if inspect.isawaitable(done):
                await done
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
