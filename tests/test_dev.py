"""``plangate dev``: a second embedded stack with plangate's own worker (the one assembly, as a
user gets it), stopped through its stop event. A plan runs on it and its effects are read back
from the dev stack's S3 and Postgres, and its calls from the worker's metrics endpoint;
afterwards this process's environment is as it was."""

from __future__ import annotations

import asyncio
import io
import os
import shlex
import stat
import uuid
from pathlib import Path

import psycopg
import pytest

from plangate.client.api import Plangate
from plangate.client.connection import connect
from plangate.dev.run import run_dev
from plangate.records.receipts import line, verify_receipt
from plangate.records.signing import SigningKey
from plangate.testing import s3_client, scheduled, scrape
from plangate.world.settings import Settings

EXPORTED = (
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "PLANGATE_DATABASE_URL",
    "PLANGATE_S3_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "PLANGATE_WORKDIR",
    "PLANGATE_DEMO_SYSTEMS",  # plangate dev turns the demo systems on
    # its local approver: the worker lists the public key, a shell signs with the key file
    "PLANGATE_APPROVERS",
    "PLANGATE_APPROVER_KEY",
    # the worker's receipt key (a file in its state directory)
    "PLANGATE_RECEIPT_KEY",
    # where its Temporal Web UI is (plangate ui links runs there: its port may have moved)
    "PLANGATE_TEMPORAL_UI",
)


async def _wait_for_line(out: io.StringIO, line: str, task: asyncio.Task[int]) -> None:
    async with asyncio.timeout(60):
        while line not in out.getvalue().splitlines():
            assert not task.done(), f"run_dev ended early: {out.getvalue()}"
            await asyncio.sleep(0.05)


def _exports(out: str) -> dict[str, str]:
    return dict(
        shlex.split(line.removeprefix("export "))[0].split("=", 1)
        for line in out.splitlines()
        if line.startswith("export ")
    )


async def test_run_dev_serves_plangates_worker_and_leaves_the_environment(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the quick start's own approver and approval rule, not the test session's
    monkeypatch.delenv("PLANGATE_APPROVERS")
    monkeypatch.delenv("PLANGATE_APPROVER_KEY")
    monkeypatch.delenv("PLANGATE_APPROVE_EFFECTS")
    monkeypatch.delenv("PLANGATE_RECEIPT_KEY", raising=False)
    environ_before = dict(os.environ)
    out = io.StringIO()
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_dev(
            state_dir,
            temporal_port=None,
            ui_port=None,
            postgres_port=None,
            s3_port=None,
            metrics_port=None,
            stop=stop,
            out=out,
        )
    )
    try:
        await _wait_for_line(out, "plangate: ready", task)
        exports = _exports(out.getvalue())
        assert sorted(exports) == sorted(EXPORTED)
        assert any(
            line.startswith("# Temporal Web UI: http://127.0.0.1:")
            for line in out.getvalue().splitlines()
        )
        # the worker's Prometheus endpoint: a comment, not an export (a shell that pastes the
        # exports and runs `plangate run` must not try to serve it too)
        (metrics_url,) = [
            line.removeprefix("# metrics: ") for line in out.getvalue().splitlines()
            if line.startswith("# metrics: ")
        ]
        assert metrics_url.startswith("http://127.0.0.1:") and metrics_url.endswith("/metrics")

        # What a user does next: paste the exports, run a plan against the dev worker.
        assert ("# money and external steps wait for a person (the default; "
                "PLANGATE_APPROVE_EFFECTS=none turns it off)") in out.getvalue().splitlines()
        settings = Settings.from_env(exports)
        tag = uuid.uuid4().hex[:8]
        bucket, job = f"dev-{tag}", f"dev-{tag}"
        s3 = s3_client(exports)
        s3.create_bucket(Bucket=bucket)
        plan = {"goal": "dev smoke", "budget": {"replans_max": 0}, "steps": [
            {"n": 1, "tool": "s3.put",
             "args": {"bucket": bucket, "key": "hello.txt", "body": "hello dev"}},
            {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
             "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
             "post": [{"probe": "job_state", "job_id": job, "want": "done"}]},
        ]}
        client = await connect(settings)
        rep = await (await Plangate(client, settings).submit(plan)).result()
        assert rep.status == "succeeded", rep.failure
        # each step: one read before its call (may it be skipped?), one after (did it act?);
        # step 1's read after and step 2's read before are one read (nothing runs between
        # them), made in step 1's activity, as is step 2's read after; step 1's read before is
        # made with the guards: one local activity
        assert await scheduled(client, rep.run_id) == {
            "guard.resolve": 1, "s3.put": 1, "warehouse.run_sql": 1,
        }
        assert [c.phase for c in rep.step(2).checks] == ["skip+pre", "post"]
        assert s3.get_object(Bucket=bucket, Key="hello.txt")["Body"].read() == b"hello dev"
        scraped = await scrape(metrics_url.removeprefix("http://").removesuffix("/metrics"))
        for tool in ("s3.put", "warehouse.run_sql"):
            assert scraped.value("plangate_tool_calls", tool=tool, status="200") == 1
        assert scraped.value("temporal_workflow_completed", workflow_type="PlanRun") == 1
        s3.close()
        async with await psycopg.AsyncConnection.connect(settings.world.database_url) as conn:
            cur = await conn.execute(
                "SELECT state FROM plangate.jobs WHERE job_id = %s", (job,)
            )
            assert await cur.fetchall() == [("done",)]

        # a card, answered by the local approver the exports name: a key only its user reads
        key_file = Path(exports["PLANGATE_APPROVER_KEY"])
        assert key_file == (state_dir / "approver.key").resolve()
        assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
        api = Plangate(client, settings)
        card_plan = {"goal": "dev card", "budget": {"replans_max": 0}, "steps": [
            {"n": 1, "tool": "s3.put", "approval": "required",
             "args": {"bucket": bucket, "key": "approved.txt", "body": "ok"}},
        ]}
        handle = await api.submit(card_plan)
        for _ in range(200):
            pending = [a for a in (await api.report(handle.id)).approvals
                       if a.status == "pending"]
            if pending:
                break
            await asyncio.sleep(0.05)
        await api.approve(handle.id, 1, pending[0].digest)
        rep = await handle.result()
        assert rep.status == "succeeded" and rep.approvals[0].answer is not None
        assert rep.approvals[0].answer.by == api.approver_key().name
        # its effect's receipt, signed by the key the exports name (made in the state dir)
        receipt_key = Path(exports["PLANGATE_RECEIPT_KEY"])
        assert receipt_key == (state_dir / "receipt.key").resolve()
        assert stat.S_IMODE(os.stat(receipt_key).st_mode) == 0o600
        (step,) = rep.steps
        assert step.ledger is not None and step.ledger.receipt is not None
        verify_receipt(line(step.ledger.receipt),
                       SigningKey.parse(await asyncio.to_thread(receipt_key.read_text)).public)
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 60) == 0
    assert dict(os.environ) == environ_before
