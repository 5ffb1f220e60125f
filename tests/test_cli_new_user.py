"""What a new user met on a first afternoon (issue 22), each as the user ran it: ``python -m
plangate ...`` in a subprocess (``asyncio.create_subprocess_exec``: an in-process worker's loop
keeps running meanwhile), against the embedded stack where a server is needed."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from plangate.testing import FakeOpenAI

PLAN: dict[str, Any] = {"goal": "g", "steps": [
    {"n": 1, "tool": "warehouse.run_sql", "effect": "read", "args": {"statement": "select_one"}},
]}


async def plangate(*argv: str, env: Mapping[str, str] | None = None,
                   stdout: Any = asyncio.subprocess.PIPE) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "plangate", *argv, env={**os.environ, **(env or {})},
        stdout=stdout, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, (out or b"").decode(), err.decode()


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def stack_env(stack: Any) -> dict[str, str]:
    return dict(stack.env())


async def test_a_malformed_digest_is_one_line_naming_its_form() -> None:
    for command in (["approve", "some-run", "--step", "1", "--digest", "deadbeef"],
                    ["reject", "some-run", "--step", "1", "--digest", "x" * 64,
                     "--reason", "no"]):
        code, out, err = await plangate(*command)
        assert code == 2 and out == ""
        digest = command[command.index("--digest") + 1]
        assert one_line(err) == (
            f"plangate: {command[0]}: --digest {digest} is not a card's digest: 64 "
            "hexadecimal digits (its SHA-256, as status shows it)"
        )


@pytest.mark.parametrize(("text", "said"), [
    ('{"goal": "g", "steps": [],}',
     "not valid JSON: Expecting property name enclosed in double quotes (line 1, column 27)"),
    ("{'goal': 'g',\n 'steps': []}",
     "not valid JSON: Expecting property name enclosed in double quotes (line 1, column 2)"),
])
async def test_a_json_plan_is_read_as_strict_json(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "plan.json"
    path.write_text(text)
    code, out, err = await plangate("check", str(path))
    assert code == 2 and out == ""
    assert one_line(err) == f"plangate: plan {path} rejected: {said}"


async def test_yaml_files_and_unnamed_text_are_still_read(tmp_path: Path) -> None:
    yaml_text = ("goal: g\nsteps:\n  - n: 1\n    tool: warehouse.run_sql\n    effect: read\n"
                 "    args: {statement: select_one}\n")
    for name, text in (("plan.yaml", yaml_text), ("plan.yml", yaml_text),
                       ("plan.txt", yaml_text), ("plan.txt", json.dumps(PLAN)),
                       ("plan.yaml", json.dumps(PLAN))):  # JSON is YAML too
        path = tmp_path / name
        path.write_text(text)
        code, out, err = await plangate("check", str(path))
        assert code == 0 and out.startswith(f"plangate: plan {path} is valid"), err
    # a file that is not .json, starting with "{", is JSON: strictly so
    path = tmp_path / "plan.txt"
    path.write_text('{"goal": "g", "steps": [],}')
    code, _, err = await plangate("check", str(path))
    assert code == 2 and "not valid JSON" in one_line(err)


async def test_every_command_says_what_it_does_in_its_help() -> None:
    from plangate.cli.commands import parser

    p = parser()
    sub = next(a for a in p._actions if a.dest == "command")
    assert isinstance(sub.choices, dict)
    names = [[n] for n in sub.choices if n != "key"] + [["key", "new"], ["key", "show"]]
    for argv in names:
        code, out, _ = await plangate(*argv, "--help")
        assert code == 0
        # usage, a blank line, then the description before the options
        first = out.split("\n\n")[1]
        assert not first.startswith(("positional arguments", "options")), (argv, out)
        assert len(first.split()) >= 8, (argv, first)


def model_env(fake: FakeOpenAI) -> dict[str, str]:
    return {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test-planning",
            "PLANGATE_MODEL": "fake-model"}


async def test_a_refused_model_plan_names_the_goal(stack_env: dict[str, str],
                                                   tmp_path: Path) -> None:
    answer = {"steps": [{"n": 1, "tool": "billing.refund_everything", "args": {}}]}
    out_file = tmp_path / "plan.yaml"
    with FakeOpenAI(responses=[json.dumps(answer)]) as fake:
        code, _, err = await plangate("plan", "refund everyone", "-o", str(out_file),
                                        env={**stack_env, **model_env(fake)})
    assert code == 2 and "?" not in err.splitlines()[0], err
    assert err.startswith("plangate: the model's plan for 'refund everyone' rejected"), err
    assert not out_file.exists()


async def test_a_plan_written_to_a_json_file_is_json(stack_env: dict[str, str],
                                                     tmp_path: Path) -> None:
    answer = {"steps": PLAN["steps"], "reason": "one read"}
    for name in ("plan.json", "plan.yaml", "plan.yml"):
        path = tmp_path / name
        with FakeOpenAI(responses=[json.dumps(answer)]) as fake:
            code, _, err = await plangate("plan", "look once", "-o", str(path),
                                          env={**stack_env, **model_env(fake)})
        assert code == 0, err
        text = path.read_text()
        if name == "plan.json":
            written = json.loads(text)  # strict JSON: no comment line
            assert written["goal"] == "look once" and written["steps"][0]["n"] == 1
        else:
            assert text.startswith("# plangate plan:"), text
        code, _, err = await plangate("check", str(path), env=stack_env)
        assert code == 0, err


async def test_report_html_says_where_it_wrote(stack_env: dict[str, str],
                                               tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    code, out, err = await plangate("report", "--since", "1h", "--html", str(page),
                                    env=stack_env)
    assert code == 0, err
    assert page.is_file()
    assert f"plangate: HTML report written to {page.resolve()}" in err.splitlines(), err
    assert out  # the table is still on stdout


async def test_output_to_a_closed_pipe_ends_quietly(stack_env: dict[str, str],
                                                    tmp_path: Path, world: Any) -> None:
    """``plangate status --json ID | head -1``: the reader leaves before the report is written;
    the command ends quietly (exit 141, as a tool killed by SIGPIPE), no BrokenPipeError.
    (``world``: plangate's tables made, as any worker makes them, so ``plangate runs`` reads
    its index and has nothing to say on stderr whichever test ran first.)"""
    from datetime import timedelta

    from plangate.client.api import Plangate
    from plangate.world.settings import Settings

    settings = Settings.from_env({**os.environ, **stack_env,
                                  "PLANGATE_TASK_QUEUE": f"no-worker-{uuid.uuid4().hex[:8]}"})
    api = await Plangate.connect(settings)
    steps = [{"n": n, "tool": "warehouse.run_sql", "effect": "read",
              "args": {"statement": "select_one"}} for n in range(1, 201)]
    run_id = await api.start({"goal": "many steps", "steps": steps},
                             start_in=timedelta(hours=1))
    # and more runs on the queue than a pipe's buffer holds lines of: plangate runs | head -1
    more = await asyncio.gather(*(api.start(PLAN, start_in=timedelta(hours=1))
                                  for _ in range(150)))
    env = {**stack_env, "PLANGATE_TASK_QUEUE": settings.temporal.task_queue}
    try:
        for _ in range(100):  # visibility lists them within a second or so
            if len(await api.runs(limit=200)) > len(more):
                break
            await asyncio.sleep(0.2)
        for argv in (["status", run_id, "--json"], ["runs", "--limit", "200"]):
            for _ in range(3):  # it was one time in three
                read, write = os.pipe()
                os.close(read)  # the reader has gone: every write is EPIPE
                try:
                    code, _, err = await plangate(*argv, stdout=write, env=env)
                finally:
                    os.close(write)
                assert (code, err) == (141, ""), (argv, err)
        # as a user types it: head prints the first run, plangate says nothing
        proc = await asyncio.create_subprocess_exec(
            "sh", "-c", f"{sys.executable} -m plangate runs --limit 200 | head -1",
            env={**os.environ, **env}, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        head_out, head_err = await asyncio.wait_for(proc.communicate(), 60)
        assert head_err == b"" and len(head_out.splitlines()) == 1, head_err
    finally:
        for r in (run_id, *more):
            await api.handle(r).terminate("test over")


async def test_runs_before_any_worker_says_the_index_is_not_there_yet(
        stack_env: dict[str, str], world: Any) -> None:
    """The first hour: a deployment whose Postgres has none of plangate's tables yet (no
    worker has started) lists its runs from Temporal, and says why in words, not Postgres's
    error."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from plangate.client.api import Plangate
    from plangate.world.settings import Settings

    url = stack_env["PLANGATE_DATABASE_URL"]
    fresh = f"fresh_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {fresh}")  # (a name made here, not a plan's)
    queue = f"first-hour-{uuid.uuid4().hex[:8]}"
    env = {**stack_env, "PLANGATE_TASK_QUEUE": queue,
           "PLANGATE_DATABASE_URL": make_conninfo(url, dbname=fresh)}
    assert conninfo_to_dict(env["PLANGATE_DATABASE_URL"])["dbname"] == fresh
    api = await Plangate.connect(Settings.from_env({**os.environ, **env}))
    run_id = await api.start(PLAN)  # no worker polls this queue: it stays running
    for _ in range(100):  # visibility lists it within a second or so
        code, out, err = await plangate("runs", env=env)
        if run_id in out:
            break
        await asyncio.sleep(0.2)
    assert code == 0 and run_id in out, (out, err)
    assert err == ("plangate: the runs index is not in Postgres yet (a worker, or `plangate "
                   "setup`, makes plangate's tables): every run listed from Temporal's "
                   "visibility\n")
    async with await psycopg.AsyncConnection.connect(env["PLANGATE_DATABASE_URL"]) as conn:
        cur = await conn.execute("SELECT to_regclass('plangate.runs_index')")
        assert (await cur.fetchone()) == (None,)  # listing made no table


async def test_cancel_of_an_ended_run_says_how_it_ended(client: Any, settings: Any,
                                                        stack_env: dict[str, str]) -> None:
    from datetime import timedelta

    from plangate.client.api import Plangate
    from plangate.testing import running_worker

    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        done = await api.start(PLAN)
        assert (await api.result(done)).status == "succeeded"
        queued = await api.start(PLAN, start_in=timedelta(hours=1))
        await api.cancel(queued, reason="not today", requester="dana")
        env = {**stack_env, "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue}
        for run_id, said in ((done, "succeeded"),
                             (queued, "cancelled before it started (not today)")):
            code, out, err = await plangate("cancel", run_id, env=env)
            assert code == 2 and out == ""
            assert one_line(err) == f"plangate: run {run_id!r} has already ended: {said}"


async def test_status_of_a_run_whose_worker_is_gone(client: Any, settings: Any,
                                                    stack_env: dict[str, str]) -> None:
    from plangate.client.api import Plangate
    from plangate.testing import running_worker, until_state
    from tests.harness import polling_plan

    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        handle = await h.start(polling_plan(f"gone-{uuid.uuid4().hex[:8]}"))
        await until_state(handle, 1, "WAITING")
    # the worker has stopped; the run waits on, and nobody answers its report query
    try:
        queue = h.queue  # the run's own: its catalogue's
        code, out, err = await plangate(
            "status", handle.id,
            env={**stack_env, "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue})
        assert code == 1 and out == ""
        assert one_line(err) == (
            f"plangate: no worker answered the report query of run {handle.id!r} within 10 s "
            f"(is a worker polling task queue {queue}?); Temporal's execution status: running"
        )
    finally:
        await api.handle(handle.id).terminate("test over")


async def test_worker_check_needs_an_s3_answer_not_any_answer(stack: Any,
                                                              stack_env: dict[str, str]) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import urlsplit

    class NotS3(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><body>Not Found</body></html>"
            self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    # PLANGATE_APPROVE_EFFECTS empty, as unset (the session sets none): the worker says its rule
    code, out, err = await plangate("worker", "--check",
                                    env={**stack_env, "PLANGATE_APPROVE_EFFECTS": ""})
    assert (code, out) == (0, "plangate: Temporal, Postgres and S3 answer\n"
                              "plangate: money and external steps wait for a person (the "
                              "default; PLANGATE_APPROVE_EFFECTS=none turns it off)\n"), err
    pg = urlsplit(stack.database_url)
    web = ThreadingHTTPServer(("127.0.0.1", 0), NotS3)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    try:
        for where in (f"{pg.hostname}:{pg.port}", f"127.0.0.1:{web.server_address[1]}"):
            env = {**stack_env, "PLANGATE_S3_ENDPOINT_URL": f"http://{where}"}
            code, out, err = await plangate("worker", "--check", env=env)
            assert code == 1 and out == "", err
            line = one_line(err)
            assert line.startswith(f"plangate: cannot reach S3 at {where}: "), line
            assert "answer" in line, line
    finally:
        web.shutdown()
        web.server_close()


async def test_one_warning_is_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"goal": "g", "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "effect": "write",
         "args": {"statement": "select_one"}}]}))
    code, out, err = await plangate("check", str(path))
    assert code == 0 and out == f"plangate: plan {path} is valid (1 warning)\n", (out, err)
    assert one_line(err).startswith("plangate: warning: step 1: a write step with no post ")


def test_every_argument_of_every_command_says_what_it_is() -> None:
    """Each argument and option of every command (and of key's and policy's) has a help text
    in its --help (issue 48: a bare ``--step STEP``, ``id``, ``--state-dir``)."""
    import argparse

    from plangate.cli.commands import parser

    def commands(p: argparse.ArgumentParser, name: str) -> list[tuple[str, Any]]:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return [(name, p)]
        return [c for a in subs for n, sub in a.choices.items()
                for c in commands(sub, f"{name} {n}".strip())]

    bare = [(name, a.option_strings or a.dest) for name, p in commands(parser(), "")
            for a in p._actions
            if not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS
            and not (a.help or "").strip()]
    assert bare == [], bare


async def test_every_problem_in_one_answer_whatever_stage_finds_it(tmp_path: Path) -> None:
    """A step that does not parse, an unknown tool, a dependency on no step and a reference
    bound by no step: each found by a later stage than the one before, all in one answer."""
    plan: dict[str, Any] = {"goal": "three problems and a fourth", "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "effect": "telepathy",
         "args": {"statement": "select_one"}},
        {"n": 2, "tool": "nope.tool", "args": {}},
        {"n": 3, "tool": "warehouse.run_sql", "effect": "read", "depends_on": [1],
         "args": {"statement": "select_one", "params": {"x": "${missing}"}, "extra": 1}},
        {"n": 4, "tool": "warehouse.run_sql", "depends_on": [9],
         "args": {"statement": "select_one"}},
    ]}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    code, out, err = await plangate("check", str(path))
    assert code == 2 and out == ""
    head, *problems = err.splitlines()
    assert head == f"plangate: plan {path} rejected:"
    assert sorted(problems) == sorted([
        "  - step 1, field effect: Input should be 'read', 'write', 'external' or 'money'",
        "  - step 2, field tool: unknown tool 'nope.tool'",
        "  - step 3, field args.extra: Extra inputs are not permitted",
        "  - step 3, field args.params: ${missing} is bound by no step",
        "  - step 4, field depends_on: no step 9",
    ]), err
    # a step depending on one that did not parse is not told that step is missing
    plan["steps"] = [plan["steps"][0], {"n": 5, "tool": "warehouse.run_sql",
                                        "depends_on": [1], "binds": {"v": "$.rows"},
                                        "args": {"statement": "select_one"}}]
    path.write_text(json.dumps(plan))
    code, _, err = await plangate("check", str(path))
    assert code == 2 and "no step 1" not in err and "step 1, field effect" in err, err


async def test_every_problem_of_one_step_in_one_answer(tmp_path: Path) -> None:
    """One step with four problems: a field the parser refuses, a missing argument, a local
    path outside the work directory and an unknown probe. Each is listed (issue 48: check
    listed the parser's and stopped; a missing argument hid the path's)."""
    plan: dict[str, Any] = {"goal": "one step, four problems", "steps": [
        {"n": 1, "tool": "s3.put", "effect": "write", "on_unmet": "explode",
         "args": {"bucket": "vendor-drops", "source": "/etc/passwd"},
         "pre": [{"probe": "no_such_probe"}]},
    ]}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    code, out, err = await plangate("check", str(path),
                                    env={"PLANGATE_WORKDIR": str(tmp_path / "work")})
    assert code == 2 and out == ""
    head, *problems = err.splitlines()
    assert head == f"plangate: plan {path} rejected:"
    assert [p.split(":")[0] for p in problems] == [
        "  - step 1, field on_unmet", "  - step 1, field args.key",
        "  - step 1, field pre[0].probe", "  - step 1, field args.source"], err
    assert "unknown probe 'no_such_probe'" in problems[2]
    assert problems[3].endswith(f"'/etc/passwd' is outside the work directory {tmp_path}/work")


async def test_ctrl_c_during_run_wait_says_how_to_follow_and_leaves_the_run_going(
    client: Any, settings: Any, stack_env: dict[str, str], pg: Any, tmp_path: Path
) -> None:
    """On a terminal (a pty), SIGINT while ``run --wait`` follows the run: the hint to watch,
    status or cancel it is printed, the command exits 130, and the run goes on to its end."""
    import contextlib
    import signal
    import threading

    from plangate.client.api import Plangate
    from plangate.testing import running_worker, until_state
    from tests.harness import polling_plan
    from tests.test_live_view import plain

    job = f"ctrl-c-{uuid.uuid4().hex[:8]}"
    run_id = f"ctrl-c-{uuid.uuid4().hex[:8]}"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(polling_plan(job, interval_s=1)))
    master, slave = os.openpty()
    raw = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child's side is closed
                return
            if not chunk:
                return
            raw.extend(chunk)

    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        env = {**stack_env, "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue,
               "TERM": "xterm-256color"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "plangate", "run", str(path), "--id", run_id, "--wait",
            stdin=slave, stdout=slave, stderr=slave, env={**os.environ, **env},
            start_new_session=True,
        )
        os.close(slave)
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            for _ in range(300):  # the run has begun and the live view follows it
                with contextlib.suppress(Exception):
                    await until_state(api.handle(run_id), 1, "WAITING")
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)
            proc.send_signal(signal.SIGINT)
            code = await asyncio.wait_for(proc.wait(), 30)
            reader.join(timeout=10)
            shown = " ".join(plain(bytes(raw)).split())
            assert code == 130, shown[-2000:]
            assert (f"plangate: stopped following run {run_id}; it goes on. Follow it: "
                    f"plangate watch {run_id} (or plangate status {run_id}); stop it: "
                    f"plangate cancel {run_id}") in shown, shown[-2000:]
            assert "Traceback" not in shown
            # the run goes on: the job is done, and the run ends as it would have
            await pg.execute("UPDATE plangate.jobs SET state = 'done' WHERE job_id = %s", (job,))
            rep = await asyncio.wait_for(api.result(run_id), 60)
            assert rep.status == "succeeded" and rep.cancellation is None
        finally:
            if proc.returncode is None:
                proc.kill()
            with contextlib.suppress(OSError):
                os.close(master)
