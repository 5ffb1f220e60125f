"""``plangate dev``: a second embedded stack with a worker, stopped through its stop event."""

from __future__ import annotations

import asyncio
import io
import shlex
from pathlib import Path

import psycopg
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from plangate.dev import run_dev
from world.settings import Settings


@workflow.defn(name="DevSmoke")
class DevSmoke:
    @workflow.run
    async def run(self, name: str) -> str:
        return f"hello {name}"


async def _smoke_worker(client: Client, settings: Settings) -> Worker:
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=[DevSmoke],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )


async def _wait_for_line(out: io.StringIO, line: str, task: asyncio.Task[int]) -> None:
    async with asyncio.timeout(60):
        while line not in out.getvalue().splitlines():
            assert not task.done(), f"run_dev ended early: {out.getvalue()}"
            await asyncio.sleep(0.05)


async def test_run_dev_prints_exports_and_serves_a_worker(tmp_path: Path) -> None:
    out = io.StringIO()
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_dev(
            tmp_path / "dev",
            temporal_port=None,
            ui_port=None,
            postgres_port=None,
            s3_port=None,
            build_worker=_smoke_worker,
            stop=stop,
            out=out,
        )
    )
    try:
        await _wait_for_line(out, "plangate: ready", task)
        exports = dict(
            shlex.split(line.removeprefix("export "))[0].split("=", 1)
            for line in out.getvalue().splitlines()
            if line.startswith("export ")
        )
        for name in (
            "TEMPORAL_ADDRESS",
            "PLANGATE_DATABASE_URL",
            "PLANGATE_S3_ENDPOINT_URL",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_DEFAULT_REGION",
            "PLANGATE_WORKDIR",
        ):
            assert exports.get(name), name
        assert any(
            line.startswith("# Temporal Web UI: http://127.0.0.1:")
            for line in out.getvalue().splitlines()
        )

        settings = Settings.from_env(exports)
        client = await Client.connect(settings.temporal_address)
        result = await client.execute_workflow(
            DevSmoke.run, "dev", id="dev-smoke", task_queue=settings.task_queue
        )
        assert result == "hello dev"
        async with await psycopg.AsyncConnection.connect(settings.database_url) as conn:
            cur = await conn.execute("SELECT 1")
            assert await cur.fetchone() == (1,)
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 60) == 0
