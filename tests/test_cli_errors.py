"""Errors of the command line: one line on stderr, the documented exit code, no traceback
(unless --debug). Real services; a service that is down is a closed port."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from plangate.cli import main
from plangate.testing import console_script
from tests.test_unreachable import closed_port

PLAN = {"goal": "g", "steps": [
    {"n": 1, "tool": "warehouse.run_sql", "effect": "read", "args": {"statement": "select_one"}},
]}


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def stack_env(stack, settings, monkeypatch):
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PLANGATE_WORKDIR", str(settings.world.workdir))


@pytest.fixture
def plan_file(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN))
    return path


async def test_status_and_cancel_of_an_unknown_run_are_bad_usage(stack_env, capsys):
    run_id = f"no-such-run-{uuid.uuid4().hex[:8]}"
    for command in ("status", "cancel"):
        assert await asyncio.to_thread(main, [command, run_id]) == 2
        line = one_line(capsys.readouterr().err)
        assert line.startswith(f"plangate: no run with id '{run_id}' in namespace default")


async def test_an_id_already_running_is_bad_usage(stack_env, plan_file, client, monkeypatch,
                                                  capsys):
    tag = uuid.uuid4().hex[:8]
    run_id = f"already-running-{tag}"
    monkeypatch.setenv("PLANGATE_TASK_QUEUE", f"no-worker-{tag}")  # the run stays running
    argv = ["run", str(plan_file), "--id", run_id]
    try:
        assert await asyncio.to_thread(main, argv) == 0
        assert capsys.readouterr().out.strip() == run_id
        assert await asyncio.to_thread(main, argv) == 2
        line = one_line(capsys.readouterr().err)
        assert line == (f"plangate: a run with id '{run_id}' is already running; "
                        "choose another --id")
    finally:
        await client.get_workflow_handle(run_id).terminate("test over")
    # and a run that has ended cannot be cancelled
    assert await asyncio.to_thread(main, ["cancel", run_id]) == 2
    # in plangate's words (issue 22), no longer Temporal's "(terminated)"
    assert "has already ended: cancelled before it started" in one_line(
        capsys.readouterr().err
    )


@pytest.mark.parametrize("argv", [["status", "some-run"], ["cancel", "some-run"], ["run", "PLAN"]])
async def test_temporal_unreachable_names_host_and_port(argv, stack_env, plan_file, monkeypatch,
                                                        capsys):
    address = f"127.0.0.1:{closed_port()}"
    monkeypatch.setenv("TEMPORAL_ADDRESS", address)
    argv = [str(plan_file) if a == "PLAN" else a for a in argv]
    assert await asyncio.to_thread(main, argv) == 1
    line = one_line(capsys.readouterr().err)
    assert line == f"plangate: cannot reach Temporal at {address}: Connection refused"


async def test_worker_with_postgres_down_names_host_and_port_never_the_password(
    stack_env, monkeypatch, capsys
):
    port = closed_port()
    monkeypatch.setenv("PLANGATE_DATABASE_URL",
                       f"postgresql://plangate:s3cr3t-pw@127.0.0.1:{port}/plangate")
    assert await asyncio.to_thread(main, ["worker"]) == 1
    err = capsys.readouterr().err
    line = one_line(err)
    assert line == f"plangate: cannot reach Postgres at 127.0.0.1:{port}: Connection refused"
    assert "s3cr3t-pw" not in err


async def test_worker_with_s3_down_names_host_and_port(stack_env, monkeypatch, capsys):
    port = closed_port()
    monkeypatch.setenv("PLANGATE_S3_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    assert await asyncio.to_thread(main, ["worker"]) == 1
    line = one_line(capsys.readouterr().err)
    assert line == f"plangate: cannot reach S3 at 127.0.0.1:{port}: Connection refused"


def test_oversized_and_binary_plan_files(tmp_path, capsys):
    big = tmp_path / "big.json"
    big.write_text(json.dumps(PLAN) + " " * (1024 * 1024))
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00")
    size = f"{big.stat().st_size:,}"
    for path, said in ((big, f"{size} bytes; a plan file is at most 1,048,576 bytes"),
                       (binary, "a binary file, not a plan (a NUL byte at offset 7)")):
        for command in ("check", "run"):
            assert main([command, str(path)]) == 2
            assert one_line(capsys.readouterr().err) == f"plangate: plan {path} rejected: {said}"


def test_debug_adds_the_traceback(monkeypatch, capsys):
    address = f"127.0.0.1:{closed_port()}"
    monkeypatch.setenv("TEMPORAL_ADDRESS", address)
    # --debug before the command and after it: the same one-line error, then its traceback
    # (a crash would also exit 1 with a traceback, but not with this first line)
    for argv in (["--debug", "status", "some-run"], ["status", "some-run", "--debug"]):
        assert main(argv) == 1
        first, *rest = capsys.readouterr().err.splitlines()
        assert first == f"plangate: cannot reach Temporal at {address}: Connection refused"
        assert rest[0] == "Traceback (most recent call last):", rest


def test_bad_usage_and_help(capsys):
    assert main(["status"]) == 2  # argparse explains on stderr
    assert "the following arguments are required: id" in capsys.readouterr().err
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "exit codes:" in out and "2    a rejected plan" in out and "--debug" in out


async def test_real_processes_leave_with_one_line(stack, tmp_path):
    """The installed console script and worker.py, as a user starts them."""
    env = {**os.environ, **stack.env(), "TEMPORAL_ADDRESS": f"127.0.0.1:{closed_port()}"}
    dead_pg = {**os.environ, **stack.env(),
               "PLANGATE_DATABASE_URL": f"postgresql://u:pw-xyz@127.0.0.1:{closed_port()}/db"}
    worker_py = Path(__file__).parent.parent / "worker.py"
    cases = [
        ([console_script("plangate"), "status", "some-run"], env, 1, "cannot reach Temporal"),
        ([sys.executable, "-m", "plangate", "cancel", "some-run"], env, 1,
         "cannot reach Temporal"),
        ([sys.executable, str(worker_py)], dead_pg, 1, "cannot reach Postgres at 127.0.0.1:"),
    ]
    for argv, run_env, want, said in cases:
        proc = await asyncio.create_subprocess_exec(
            *argv, env=run_env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await proc.communicate()
        text = err.decode()
        assert proc.returncode == want, (argv, text)
        assert said in one_line(text) and "pw-xyz" not in text and out == b""
