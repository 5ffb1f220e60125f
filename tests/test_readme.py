"""The README's first plan, run as a newcomer runs it: ``plangate dev`` in one terminal, the
README's commands in another that pasted its ``export`` lines.

The commands come from the README's fenced blocks (section "A first plan"), in order, so an
edit of the README changes what runs here. A ``plangate dev`` process is started as the README
writes it (with a state directory of its own and free ports: other stacks share the machine);
every other command runs through ``bash -c`` in the repository's root with the exports the dev
process printed, ``.venv/bin/`` being this venv's. What each command must do:

- ``plangate check``: exit 0, printing what its comment says;
- ``plangate run ... --wait`` followed by an output block: the exit code of the status that
  block shows (halted: 1) and that block as the end of its output (run ids aside);
  otherwise: exit 0 and a succeeded run;
- ``plangate status <run id> --json``: the report of the last run (``<run id>`` replaced);
- ``plangate run`` without ``--wait``: exit 0, its run id the last run;
- ``plangate status <run id>``: asked again until the run's card is published (it comes after
  the step's first read; exit 1 meanwhile, the run not succeeded); the output block after it
  among its lines (the run id and digest as ``<run id>`` and ``<digest>``), and nothing
  credited yet (no row in ``demo.credits`` for the example's account);
- ``plangate approve ... <digest>``: the ``plangate approve`` line that status printed, which the
  README's command must be once the digest is filled in;
- ``plangate watch <run id>``: exit 0, a succeeded run, and exactly one credit;
- anything else (the snippet that puts the export, ``plangate runs ...``): exit 0.

The getting-started page shows the same commands (checked here, not run twice). Also: one dev
stack per state directory (a second ``plangate dev`` on it exits 2 naming the first, whose runs
go on); a restart keeps the runs, the tables and the S3 buckets; a killed one's servers are
stopped by the next.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from plangate.demo.schema import EXAMPLE_ACCOUNT
from plangate.testing import stack_state
from tests.test_docs import DOCS, FENCE, README, ROOT, section, session_free_env

BIN = Path(sys.executable).parent
RUN_ID = re.compile(r"\bplan-[0-9a-f]{12}\b")
READY = "plangate: ready"
CMD_TIMEOUT = 120


def readme_blocks() -> list[tuple[str, str]]:
    """The fenced blocks of the README's "A first plan", in order: (language, body)."""
    return FENCE.findall(section(README.read_text(), "A first plan"))


def commands(block: str) -> list[str]:
    """A bash block as the commands a reader pastes: one per line, a heredoc with its line,
    trailing comments dropped."""
    out: list[str] = []
    lines = iter(block.splitlines())
    for line in lines:
        if not line.strip():
            continue
        heredoc = re.search(r"<<-?'?(\w+)'?", line)
        if heredoc:
            body = [line]
            for more in lines:
                body.append(more)
                if more.strip() == heredoc.group(1):
                    break
            out.append("\n".join(body) + "\n")
        else:
            out.append(re.sub(r"\s+#.*$", "", line).strip())
    return out


def as_here(command: str) -> str:
    return command.replace(".venv/bin/", f"{BIN}/")


def exports(out: str) -> dict[str, str]:
    """What a reader pastes into the second terminal: the ``export`` lines, parsed by a shell's
    rules."""
    env: dict[str, str] = {}
    for line in out.splitlines():
        if line.startswith("export "):
            name, _, value = shlex.split(line.removeprefix("export "))[0].partition("=")
            env[name] = value
    return env


class DevProcess:
    """``plangate dev`` as a child process, its stdout and stderr collected as they come."""

    def __init__(self, command: str, state_dir: Path) -> None:
        argv = [*shlex.split(as_here(command)), "--state-dir", str(state_dir), "--free-ports"]
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=session_free_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._readers = [
            threading.Thread(target=self._drain, args=(s, d), daemon=True)
            for s, d in ((self.proc.stdout, self.lines), (self.proc.stderr, self.errors))
        ]
        for t in self._readers:
            t.start()

    @staticmethod
    def _drain(stream: object, into: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            into.append(line.rstrip("\n"))

    @property
    def stdout(self) -> str:
        return "\n".join(self.lines)

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while READY not in self.lines:
            assert self.proc.poll() is None, (
                f"plangate dev exited {self.proc.returncode}: {self.stdout}\n"
                + "\n".join(self.errors[-20:])
            )
            assert time.monotonic() < deadline, f"no {READY!r} in {timeout}s: {self.stdout}"
            time.sleep(0.1)

    def stop(self) -> int:
        """Ctrl-C, as a reader stops it; its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for t in self._readers:
            t.join(5)
        return self.proc.returncode


def dev_command() -> str:
    (command,) = [c for kind, body in readme_blocks() if kind == "bash"
                  for c in commands(body) if re.search(r"\bplangate dev\b", c)]
    return command


@contextmanager
def running_dev(name: str) -> Iterator[DevProcess]:
    """The README's ``plangate dev``, up: its own state directory (``name``), free ports;
    stopped cleanly at the end."""
    with stack_state(name) as state_dir:
        proc = DevProcess(dev_command(), state_dir)
        try:
            proc.wait_ready()
            yield proc
        finally:
            assert proc.stop() == 0, proc.errors[-20:]


@pytest.fixture(scope="module")
def dev() -> Iterator[DevProcess]:
    with running_dev("readme") as proc:
        yield proc


def second_terminal(dev: DevProcess) -> dict[str, str]:
    return session_free_env() | exports(dev.stdout)


def sh(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", as_here(command)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=CMD_TIMEOUT)


def normalized(text: str) -> list[str]:
    return [RUN_ID.sub("plan-<id>", line.rstrip()) for line in text.strip().splitlines()]


S3_SCRIPT = """
import os, sys, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["PLANGATE_S3_ENDPOINT_URL"])
if sys.argv[1] == "put":
    s3.create_bucket(Bucket="kept")
    s3.put_bucket_versioning(Bucket="kept", VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket="kept", Key="a/b.csv", Body=b"x,0\\n")
    s3.put_object(Bucket="kept", Key="a/b.csv", Body=b"x,1\\n")
else:
    versions = s3.list_object_versions(Bucket="kept")["Versions"]
    body = s3.get_object(Bucket="kept", Key="a/b.csv")["Body"].read().decode()
    sys.stdout.write(f"{len(versions)} {body}")
"""


def job_plan(job: str) -> dict[str, object]:
    """A one-step plan on the dev stack's Postgres."""
    return {"goal": "a job done", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "set_job_state", "params": {"job_id": job, "state": "done"}},
         "post": [{"probe": "job_state", "job_id": job, "want": "done"}]},
    ]}


def credits(env: dict[str, str]) -> list[tuple[object, ...]]:
    """The credits of the example's customer, in the dev stack's Postgres."""
    with psycopg.connect(env["PLANGATE_DATABASE_URL"]) as conn:
        return conn.execute(
            "SELECT amount_eur::float, applied_to FROM demo.credits WHERE account_id = %s",
            (EXAMPLE_ACCOUNT,),
        ).fetchall()


def card_shown(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``plangate status`` of a run, once it shows a card waiting (with its approve line)."""
    for _ in range(120):
        proc = sh(command, env)
        if "    plangate approve " in proc.stdout:  # exit 1 meanwhile: not succeeded (yet)
            return proc
        time.sleep(0.5)
    raise AssertionError(f"{command!r} shows no card: {proc.stdout}{proc.stderr}")


def test_the_first_plan_runs_as_the_readme_says(dev: DevProcess) -> None:
    """Every command of "A first plan", in order, as a reader runs them."""
    assert dev.stdout.splitlines()[-1] == READY
    env = second_terminal(dev)
    assert {"TEMPORAL_ADDRESS", "PLANGATE_S3_ENDPOINT_URL", "PLANGATE_DATABASE_URL"} <= set(env)
    assert any(line.startswith("# Temporal Web UI: http://") for line in dev.lines)
    assert any(line.startswith("# metrics: http://") for line in dev.lines)

    blocks = readme_blocks()
    last_run: str | None = None
    approve_line: str | None = None
    ran: list[str] = []
    for i, (kind, body) in enumerate(blocks):
        if kind != "bash":
            continue
        cmds = commands(body)
        shown = blocks[i + 1][1] if i + 1 < len(blocks) and blocks[i + 1][0] == "" else None
        for j, command in enumerate(cmds):
            if re.search(r"\bplangate dev\b", command):
                continue  # the fixture's process
            if "<run id>" in command:
                assert last_run, f"{command!r} before any run"
                command = command.replace("<run id>", last_run)
            if "<digest>" in command:
                assert approve_line, f"{command!r} before a card was shown"
                digest = approve_line.rsplit(" ", 1)[1]
                assert command == f".venv/bin/{approve_line}".replace(digest, "<digest>")
                command = command.replace("<digest>", digest)
            status_plain = re.search(r"\bplangate status\b", command) and "--json" not in command
            proc = card_shown(command, env) if status_plain else sh(command, env)
            said = proc.stdout + proc.stderr
            ran.append(command)
            if status_plain:
                assert last_run, f"{command!r} before any run"
                (approve_line,) = [line.strip() for line in proc.stdout.splitlines()
                                   if line.strip().startswith("plangate approve ")]
                if shown is not None and j == len(cmds) - 1:
                    digest = approve_line.rsplit(" ", 1)[1]
                    out = proc.stdout.replace(last_run, "<run id>").replace(digest, "<digest>")
                    assert "\n".join(shown.splitlines()) in out, said
                assert credits(env) == []  # the credit waits for its card
            elif re.search(r"\bplangate approve\b", command):
                assert proc.returncode == 0, said
            elif re.search(r"\bplangate watch\b", command):
                assert proc.returncode == 0, said
                assert f"run {last_run}: succeeded" in proc.stdout, said
                assert credits(env) == [(7.25, "account")]  # approved: made once
            elif re.search(r"\bplangate run\b(?!.*--wait)", command):
                assert proc.returncode == 0, said
                (last_run,) = RUN_ID.findall(proc.stdout)
            elif re.search(r"\bplangate check\b", command):
                assert proc.returncode == 0, said
                comment = re.search(r"#\s*(.+)$", body.splitlines()[0])
                if comment and len(cmds) == 1:
                    assert proc.stdout.strip() == comment.group(1).strip()
            elif re.search(r"\bplangate run\b.*--wait", command):
                found = RUN_ID.findall(proc.stdout)
                assert found, said
                last_run = found[-1]
                if shown is not None and j == len(cmds) - 1:
                    # the output block the README shows: its end, and the exit code it implies
                    want = normalized(shown)
                    status = re.search(r": (\w+) \(plan version", want[0])
                    assert status, want[0]
                    assert proc.returncode == (0 if status.group(1) == "succeeded" else 1), said
                    assert normalized(proc.stdout)[-len(want):] == want, said
                else:
                    assert proc.returncode == 0, said
                    assert f"run {last_run}: succeeded" in proc.stdout, said
                    assert proc.stdout.count(": DONE") >= 2, said
            elif re.search(r"\bplangate status\b.*--json", command):
                assert proc.returncode == 0, said
                report = json.loads(proc.stdout)
                assert report["run_id"] == last_run and report["status"] == "succeeded"
            else:
                assert proc.returncode == 0, f"{command!r}: {said}"
    # the story: a halted run, the export put, a succeeded run, its report, the waiting runs;
    # a credit that waits for its card, approved, made once
    assert len(ran) >= 10, ran
    assert approve_line is not None and credits(env) == [(7.25, "account")]

    # "Truncate the export to its header and the load is refused and rolled back (`...`)":
    # the README's snippet with the header alone as its body, then its run again
    prose = section(README.read_text(), "A first plan")
    claim = re.search(r"Truncate\s+the\s+export\s+to\s+its\s+header\b.*?\(`([^`]+)`\)",
                      prose, re.S)
    assert claim, "the README no longer says what a truncated export does"
    (put,) = [c for c in ran if "put_object" in c]
    header_only = put.replace('Body="invoice_id,amount\\n" + rows', 'Body="invoice_id,amount\\n"')
    assert header_only != put
    assert sh(header_only, env).returncode == 0
    (run,) = {c for c in ran if re.search(r"\bplangate run\b.*--wait", c)}
    proc = sh(run, env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert claim.group(1) in proc.stdout, proc.stdout


def test_the_getting_started_page_shows_the_commands_run_here() -> None:
    """Its interactive sections run nothing the README's first plan does not (once the run id
    is filled in), so the walk above covers them too."""
    page = (DOCS / "getting-started.md").read_text()
    tested = {c for kind, body in readme_blocks() if kind == "bash" for c in commands(body)}
    shown = [c for heading in ("Working interactively", "A first plan")
             for kind, body in FENCE.findall(section(page, heading)) if kind == "bash"
             for c in commands(body)]
    assert len(shown) >= 6, shown
    assert set(shown) <= tested, set(shown) - tested


def test_a_second_dev_on_the_same_state_dir_exits_2_and_the_first_runs_on(
    dev: DevProcess, tmp_path: Path
) -> None:
    state_dir = Path(exports(dev.stdout)["PLANGATE_WORKDIR"]).parent
    started = time.monotonic()
    second = subprocess.run(
        [str(BIN / "plangate"), "dev", "--state-dir", str(state_dir), "--free-ports"],
        cwd=ROOT, env=session_free_env(), capture_output=True, text=True, timeout=60,
    )
    assert second.returncode == 2, second.stdout + second.stderr
    assert time.monotonic() - started < 30  # refused before starting anything
    assert second.stdout == ""
    (line,) = second.stderr.splitlines()
    env = exports(dev.stdout)
    assert f"pid {dev.proc.pid}" in line
    assert env["TEMPORAL_ADDRESS"] in line and env["PLANGATE_S3_ENDPOINT_URL"] in line
    assert str(state_dir) in line and "--state-dir" in line
    assert dev.proc.poll() is None

    # the first one's worker still runs plans, on its own Postgres
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(job_plan(f"readme-{os.getpid()}")))
    run = sh(f".venv/bin/plangate run {plan} --wait", second_terminal(dev))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "succeeded" in run.stdout


def test_a_restarted_dev_keeps_its_runs_tables_and_buckets(tmp_path: Path) -> None:
    """Ctrl-C, then ``plangate dev`` again on the same state directory: the run is in
    Temporal's history, its row in Postgres, the object in S3 (S3 lived in memory before)."""
    with stack_state("restart") as state_dir:
        first = DevProcess(dev_command(), state_dir)
        try:
            first.wait_ready()
            assert any(line.startswith("# kept across restarts:") and "S3" in line
                       for line in first.lines)
            env = second_terminal(first)
            script = tmp_path / "s3.py"
            script.write_text(S3_SCRIPT)
            put = sh(f".venv/bin/python {script} put", env)
            assert put.returncode == 0, put.stderr
            plan = tmp_path / "plan.json"
            plan.write_text(json.dumps(job_plan("kept")))
            run = sh(f".venv/bin/plangate run {plan} --wait", env)
            assert run.returncode == 0, run.stdout + run.stderr
            (run_id,) = set(RUN_ID.findall(run.stdout))
        finally:
            assert first.stop() == 0, first.errors[-20:]

        again = DevProcess(dev_command(), state_dir)
        try:
            again.wait_ready()
            assert "# 1 S3 bucket(s) restored from s3.pickle" in again.lines
            env = second_terminal(again)
            get = sh(f".venv/bin/python {script} get", env)
            assert get.returncode == 0 and get.stdout == "2 x,1\n"  # both versions, get.stderr
            status = sh(f".venv/bin/plangate status {run_id} --json", env)
            assert status.returncode == 0, status.stderr
            assert json.loads(status.stdout)["status"] == "succeeded"
            with psycopg.connect(env["PLANGATE_DATABASE_URL"]) as conn:
                rows = conn.execute("SELECT state FROM plangate.jobs WHERE job_id = %s",
                                    ("kept",)).fetchall()
            assert rows == [("done",)]
        finally:
            assert again.stop() == 0, again.errors[-20:]


def test_a_killed_dev_leaves_no_server_behind_the_next_one(tmp_path: Path) -> None:
    """``kill -9`` of ``plangate dev``: its Temporal server and Postgres (sessions of their own)
    outlive it; the next ``plangate dev`` there stops them before starting its own, rather than
    running a second server on one database."""
    with stack_state("killed") as state_dir:
        first = DevProcess(dev_command(), state_dir)
        try:
            first.wait_ready()
            leftover = int((state_dir / "temporal.db.pid").read_text())
            first.proc.kill()
            first.proc.wait(30)
            assert Path(f"/proc/{leftover}").exists()  # the server outlived its parent
        finally:
            first.stop()
        again = DevProcess(dev_command(), state_dir)
        try:
            again.wait_ready()
            assert not Path(f"/proc/{leftover}").exists() or _zombie(leftover)
            plan = tmp_path / "plan.json"
            plan.write_text(json.dumps(job_plan("after-kill")))
            run = sh(f".venv/bin/plangate run {plan} --wait", second_terminal(again))
            assert run.returncode == 0, run.stdout + run.stderr
        finally:
            assert again.stop() == 0, again.errors[-20:]
        assert not (state_dir / "temporal.db.pid").exists()


def _zombie(pid: int) -> bool:
    """Ended, not yet reaped by its parent (init, since its own parent was killed)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
