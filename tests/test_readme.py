"""The README and docs/getting-started.md as written, run as a newcomer runs them: a fresh clone,
fresh shells (``HOME`` and ``PATH=/usr/bin:/bin``, nothing else), ``plangate dev`` in one of
them, every other command in another that pasted its ``export`` lines.

The commands come from the fenced ``bash`` blocks of both pages, so an edited page is what runs
here. The clone is ``git clone`` of this checkout at what its tracked files hold now (``git stash
create``: edits not yet committed included, untracked files not), with ``.venv`` a link to the
venv these tests run in (the one the quick start made; its editable install is this checkout's
code). Every shell starts with the pages' ``source .venv/bin/activate``. Each command of the
pages is run, or listed in ``SKIPPED`` with the reason it cannot run here: a command added to a
page fails this test until it is one or the other. What each must do:

- ``plangate dev``: ``export`` lines (the Web UI's address among them), then
  ``plangate: ready``; the one change to what the page says is ``--free-ports`` (other stacks
  share this machine);
- ``plangate check``: exit 0, printing what its comment says;
- ``plangate run ... --wait`` followed by an output block: the exit code of the status that
  block shows (halted: 1) and that block as the end of its output (run ids aside);
  otherwise: exit 0 and a succeeded run;
- ``plangate status <run id> --json``: the report of the last run (``<run id>`` replaced);
- ``plangate run`` without ``--wait``: exit 0, its run id the last run;
- ``plangate status <run id>``: asked again until the run's card is published (it comes after
  the step's first read; exit 1 meanwhile); the output block after it among its lines, nothing
  credited yet (no row in ``demo.credits`` for the example's account), and a ``plangate
  approve`` line, which the page's ``plangate approve ... <digest>`` must be once filled in;
- that printed line, pasted as it is: exit 0. (In a shell that did not activate the venv,
  ``.venv/bin/plangate status`` prints the line with the venv's ``plangate`` by its path.)
- ``plangate watch <run id>``: exit 0, a succeeded run, and exactly one credit;
- anything else (the snippet that puts the export, ``plangate runs ...``): exit 0.

Also: one dev stack per state directory (a second ``plangate dev`` on it exits 2 naming the
first, whose runs go on); a restart keeps the runs, the tables and the S3 buckets; a killed one's
servers are stopped by the next.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import sysconfig
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

BIN = Path(sysconfig.get_path("scripts"))
RUN_ID = re.compile(r"\bplan-[0-9a-f]{12}\b")
READY = "plangate: ready"
CMD_TIMEOUT = 120
ACTIVATE = "source .venv/bin/activate"
FRESH_PATH = "/usr/bin:/bin"
# Shown on the pages, not run here, each with the reason.
SKIPPED = {
    "bash scripts/demo.sh": "minutes on a stack of its own: tests/test_docs.py runs it as written "
                            "(test_the_readme_runs_the_demo_as_written)",
    "bash scripts/test.sh": "the test command, which runs this test; tests/test_docs.py holds "
                            "it to what .ci/run runs",
}


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


def shown_commands() -> list[str]:
    """Every command of every bash block of the README and of docs/getting-started.md."""
    return [c for page in (README, DOCS / "getting-started.md")
            for body in (b for kind, b in FENCE.findall(page.read_text()) if kind == "bash")
            for c in commands(body)]


def as_here(command: str) -> str:
    """A page's command with this venv's executables (a reader's shell has them on PATH)."""
    command = re.sub(r"(?<![\w/.])\.venv/bin/", f"{BIN}/", command)
    return re.sub(r"^plangate\b", f"{BIN}/plangate", command)


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
    """``plangate dev`` as a child process, its stdout and stderr collected as they come:
    ``command`` with this venv's ``plangate``, on ``state_dir`` with free ports; or ``argv``
    as given, in ``cwd`` with ``env``."""

    def __init__(self, command: str = "", state_dir: Path | None = None, *,
                 argv: list[str] | None = None, cwd: Path = ROOT,
                 env: dict[str, str] | None = None) -> None:
        if argv is None:
            argv = [*shlex.split(as_here(command)), "--state-dir", str(state_dir),
                    "--free-ports"]
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=session_free_env() if env is None else env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # its own process group: Ctrl-C reaches it alone
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
        for line in stream:  # type: ignore[attr-defined]  # a text pipe: lines as they come
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
        """Ctrl-C, as a reader stops it (SIGINT to its process group); its exit code."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
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


def fresh_clone(dest: Path) -> Path:
    """``git clone`` of this checkout as its tracked files are now, ``.venv`` this venv."""
    def git(*args: str, cwd: Path = ROOT) -> str:
        return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                              text=True, timeout=60).stdout.strip()
    rev = git("stash", "create") or git("rev-parse", "HEAD")
    git("clone", "--quiet", "--shared", "--no-checkout", str(ROOT), str(dest))
    git("checkout", "--quiet", "--detach", rev, cwd=dest)
    (dest / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    return dest


class Shell:
    """A fresh terminal in the clone: ``HOME`` and ``PATH=/usr/bin:/bin`` alone, then the lines
    a reader pasted into it (the venv's activation, the exports); each command runs after them
    in a new ``bash``."""

    def __init__(self, cwd: Path, home: Path, pasted: list[str]) -> None:
        self.cwd, self.home, self.pasted = cwd, home, list(pasted)

    @property
    def env(self) -> dict[str, str]:
        return {"HOME": str(self.home), "PATH": FRESH_PATH}

    def script(self, command: str) -> str:
        return "\n".join([*self.pasted, command])

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", self.script(command)], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=CMD_TIMEOUT)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_clone(tmp_path_factory.mktemp("readme") / "plangate")


@pytest.fixture(scope="module")
def dev(clone: Path) -> Iterator[DevProcess]:
    """The pages' ``plangate dev`` in a fresh shell of the clone (its state in the clone's
    ``.plangate/dev``, as on a reader's machine)."""
    terminal = Shell(clone, clone.parent, [ACTIVATE])
    script = terminal.script(f"exec {dev_command()} --free-ports")
    proc = DevProcess(argv=["bash", "-c", script], cwd=clone, env=terminal.env)
    try:
        proc.wait_ready()
        yield proc
    finally:
        assert proc.stop() == 0, proc.errors[-20:]


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


def card_shown(command: str, shell: Shell) -> subprocess.CompletedProcess[str]:
    """``plangate status`` of a run, once it shows a card waiting (with its approve line)."""
    for _ in range(120):
        proc = shell.run(command)
        if re.search(r"^    \S*plangate approve ", proc.stdout, re.M):  # exit 1 meanwhile
            return proc
        time.sleep(0.5)
    raise AssertionError(f"{command!r} shows no card: {proc.stdout}{proc.stderr}")


def printed_approve(out: str) -> str:
    found = [x.strip() for x in out.splitlines() if re.match(r"\s+\S*plangate approve ", x)]
    assert len(found) == 1, f"not one approve line: {out}"
    return found[0]


def test_every_command_of_the_readme_and_getting_started_runs_as_written(
    dev: DevProcess, clone: Path
) -> None:
    """The README's "A first plan", in order, then what getting-started shows besides; each
    command of either page run (or in ``SKIPPED``)."""
    assert dev.lines[-1] == READY
    shown_env = exports(dev.stdout)
    assert {"TEMPORAL_ADDRESS", "PLANGATE_S3_ENDPOINT_URL", "PLANGATE_DATABASE_URL"} <= set(
        shown_env)
    (ui,) = [x.removeprefix("# Temporal Web UI: ") for x in dev.lines
             if x.startswith("# Temporal Web UI: http://")]
    assert shown_env["PLANGATE_TEMPORAL_UI"] == ui  # the approval page links it where it is
    assert any(line.startswith("# metrics: http://") for line in dev.lines)
    export_lines = [x for x in dev.lines if x.startswith("export ")]

    first = Shell(clone, clone.parent, [ACTIVATE])  # the pages' commands before the stack's
    second = Shell(clone, clone.parent, [ACTIVATE, *export_lines])
    env = shown_env
    ran: list[str] = [ACTIVATE, dev_command()]
    blocks = readme_blocks()
    before_dev = True
    last_run: str | None = None
    approve_line: str | None = None

    def step(command: str, body: str, shown: str | None, last: bool) -> None:
        nonlocal last_run, approve_line
        shell = first if before_dev else second
        if "<run id>" in command:
            assert last_run, f"{command!r} before any run"
            command = command.replace("<run id>", last_run)
        status_plain = re.search(r"\bplangate status\b", command) and "--json" not in command
        if re.search(r"\bplangate approve\b", command):
            # the line status printed, pasted as it is; the page shows that very line
            assert approve_line and last_run, f"{command!r} before a card was shown"
            digest = approve_line.rsplit(" ", 1)[1]
            assert command.replace("<digest>", digest) == approve_line
            proc = shell.run(approve_line)
        elif status_plain:
            proc = card_shown(command, shell)
        else:
            proc = shell.run(command)
        said = proc.stdout + proc.stderr
        if status_plain:
            assert last_run, f"{command!r} before any run"
            approve_line = printed_approve(proc.stdout)
            assert approve_line.startswith(f"plangate approve {last_run} --step 1 --digest ")
            if shown is not None and last:
                digest = approve_line.rsplit(" ", 1)[1]
                out = proc.stdout.replace(last_run, "<run id>").replace(digest, "<digest>")
                assert "\n".join(shown.splitlines()) in out, said
            assert credits(env) == []  # the credit waits for its card
            # a shell that never activated the venv: the same line, the venv's plangate by path
            bare = Shell(clone, clone.parent, export_lines).run(
                ".venv/bin/" + command.removeprefix(".venv/bin/"))
            venv_plangate = shlex.quote(str(clone / ".venv" / "bin" / "plangate"))
            assert printed_approve(bare.stdout) == venv_plangate + approve_line.removeprefix(
                "plangate"), bare.stdout
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
            comment = [re.search(r"#\s*(.+)$", x) for x in body.splitlines() if " check " in x]
            if comment and comment[0]:
                assert proc.stdout.strip() == comment[0].group(1).strip()
        elif re.search(r"\bplangate run\b.*--wait", command):
            found = RUN_ID.findall(proc.stdout)
            assert found, said
            last_run = found[-1]
            if shown is not None and last:
                # the output block the page shows: its end, and the exit code it implies
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

    for i, (kind, body) in enumerate(blocks):
        if kind != "bash":
            continue
        cmds = commands(body)
        shown = blocks[i + 1][1] if i + 1 < len(blocks) and blocks[i + 1][0] == "" else None
        for j, command in enumerate(cmds):
            if command == ACTIVATE:
                continue  # every shell here starts with it
            if command == dev_command():
                before_dev = False  # the fixture's process: the exports pasted from here on
                continue
            step(command, body, shown, j == len(cmds) - 1)
            ran.append(command)
    # the story: a halted run, the export put, a succeeded run, its report, the waiting runs;
    # a credit that waits for its card, approved with the line printed, made once
    assert len(ran) >= 12, ran
    assert approve_line is not None and credits(env) == [(7.25, "account")]

    # what getting-started shows besides, in its order, on the same stack
    for command in shown_commands():
        if command not in ran and command not in SKIPPED:
            step(command, "", None, False)
            ran.append(command)
    assert not set(shown_commands()) - set(ran) - set(SKIPPED)

    # "Truncate the export to its header and the load is refused and rolled back (`...`)":
    # the README's snippet with the header alone as its body, then its run again
    prose = section(README.read_text(), "A first plan")
    claim = re.search(r"Truncate\s+the\s+export\s+to\s+its\s+header\b.*?\(`([^`]+)`\)",
                      prose, re.S)
    assert claim, "the README no longer says what a truncated export does"
    (put,) = [c for c in ran if "put_object" in c]
    header_only = put.replace('Body="invoice_id,amount\\n" + rows', 'Body="invoice_id,amount\\n"')
    assert header_only != put
    assert second.run(header_only).returncode == 0
    (run,) = {c for c in ran if re.search(r"\bplangate run\b.*--wait", c)}
    proc = second.run(run)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert claim.group(1) in proc.stdout, proc.stdout


def test_a_printed_command_names_the_plangate_that_runs() -> None:
    """``plangate`` where that name on PATH is this plangate (an activated venv); else this
    venv's ``plangate`` by its path, which a fresh shell runs as it is."""
    code = "from plangate.client.command import plangate_command; print(plangate_command())"
    on_path = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={"PATH": f"{BIN}:{FRESH_PATH}"}, timeout=60)
    assert on_path.stdout.strip() == "plangate", on_path.stderr
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={"PATH": FRESH_PATH}, timeout=60)
    name = fresh.stdout.strip()
    assert name == shlex.quote(str(BIN / "plangate")), fresh.stderr
    pasted = subprocess.run(["bash", "-c", f"{name} approve --help"], capture_output=True,
                            text=True, env={"PATH": FRESH_PATH}, timeout=60)
    assert pasted.returncode == 0 and "--digest" in pasted.stdout, pasted.stderr


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
