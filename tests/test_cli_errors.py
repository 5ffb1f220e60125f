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
    assert line == (f"plangate: cannot reach Temporal at {address} (TEMPORAL_ADDRESS): Connection "
                    "refused. Start Temporal there, or set TEMPORAL_ADDRESS to where it listens "
                    "(for `plangate dev`, paste the export lines it printed into this shell)")


async def test_worker_with_postgres_down_names_host_and_port_never_the_password(
    stack_env, monkeypatch, capsys
):
    port = closed_port()
    monkeypatch.setenv("PLANGATE_DATABASE_URL",
                       f"postgresql://plangate:s3cr3t-pw@127.0.0.1:{port}/plangate")
    assert await asyncio.to_thread(main, ["worker"]) == 1
    err = capsys.readouterr().err
    line = one_line(err)
    assert line == (f"plangate: cannot reach Postgres at 127.0.0.1:{port} (PLANGATE_DATABASE_URL): "
                    "Connection refused. Start Postgres there, or set PLANGATE_DATABASE_URL to "
                    "where it listens (for `plangate dev`, paste the export lines it printed "
                    "into this shell)")
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
        assert first.startswith(f"plangate: cannot reach Temporal at {address} "
                                "(TEMPORAL_ADDRESS): Connection refused. "), first
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


async def plangate(env: dict[str, str], *argv: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "plangate", *argv, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def without_exports(tmp_path: Path) -> dict[str, str]:
    """A fresh shell's environment: none of `plangate dev`'s exports, no Temporal profile."""
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}


async def test_a_shell_without_exports_is_told_where_it_talks_and_what_to_do(tmp_path):
    """No TEMPORAL_ADDRESS, no profile: plangate's default, localhost:7233, where anything may
    listen (issue 48). Reached, a line on stderr names it and where it came from; not reached,
    the one line says what to do."""
    code, _, err = await plangate(without_exports(tmp_path), "runs", "--limit", "1")
    if code == 0:  # something answers on 7233 here
        assert err.splitlines()[0] == (
            "plangate: using Temporal at localhost:7233, the default (no TEMPORAL_ADDRESS, no "
            "Temporal profile); set TEMPORAL_ADDRESS to choose, or for `plangate dev`'s own, "
            "paste the export lines it printed"), err
    else:
        assert code == 1
        line = one_line(err)
        assert line.startswith("plangate: cannot reach Temporal at localhost:7233 (the default: "
                               "no TEMPORAL_ADDRESS, no Temporal profile): "), line
        assert line.endswith(". To use plangate's own services, start `plangate dev` and paste "
                             "the export lines it prints; else set TEMPORAL_ADDRESS "
                             "(docs/configuration.md)"), line
    # a profile's address is named as the profile's
    config = tmp_path / "temporal.toml"
    address = f"127.0.0.1:{closed_port()}"
    config.write_text(f'[profile.default]\naddress = "{address}"\n')
    code, _, err = await plangate({**without_exports(tmp_path),
                                   "TEMPORAL_CONFIG_FILE": str(config)}, "runs")
    assert code == 1 and one_line(err).startswith(
        f"plangate: cannot reach Temporal at {address} (profile default of {config}): "), err


async def test_connected_to_the_default_address_says_so(stack, settings, capsys):
    """The note, where the default answers: this deployment's Temporal, as if at the default."""
    from dataclasses import replace

    from plangate.cli.services import connect

    for origin, noted in (("", True), ("TEMPORAL_ADDRESS", False)):
        s = replace(settings, temporal=replace(settings.temporal, address_from=origin))
        await connect(s)
        err = capsys.readouterr().err
        assert (f"plangate: using Temporal at {settings.temporal.address}, the default" in err
                ) is noted, err


async def test_postgres_down_report_says_one_line_per_part_and_no_library_noise(stack, tmp_path):
    """`plangate report` with Postgres down: plangate's own lines alone on stderr (issue 48:
    psycopg's pool logged each failed connection, with libpq's hint, before them)."""
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "all.cedar").write_text("permit(principal, action, resource);\n")
    port = closed_port()
    env = {**os.environ, **stack.env(), "PLANGATE_POLICIES": str(policies),
           "PLANGATE_TASK_QUEUE": f"quiet-{uuid.uuid4().hex[:8]}",
           "PLANGATE_DATABASE_URL": f"postgresql://u:pw-xyz@127.0.0.1:{port}/db"}
    code, out, err = await plangate(env, "report", "--since", "1h")
    assert code == 0 and "staleness since" in out, err
    assert err.splitlines() == [
        f"plangate: Postgres at 127.0.0.1:{port} could not be reached (Connection refused): "
        "every run read from Temporal's visibility",
        "plangate: the policy decisions in Postgres could not be read (couldn't get a "
        "connection after 3.00 sec): none shown",
    ], err
    # --debug: the library's records, on stderr under their logger's name
    code, _, err = await plangate(env, "report", "--since", "1h", "--debug")
    assert code == 0 and "psycopg.pool: WARNING: error connecting" in err, err
