"""The back door: the tools of an MCP server guarded by plangate, declared in an MCP servers
file (PLANGATE_MCP_SERVERS, examples/mcp-git.yaml). Against the real `mcp-server-git` over
stdio and a scratch git repository, on a real worker: a plan's effects read back through the
server's own read tools and through `git` itself, a tool that "succeeds" without acting failing
its post check, a re-run skipped as done, a server gone mid-run waited for and then halted (or
reconnected), and files and plans refused with line, step and field."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import JsonValue

from plangate.activities.extensions import ExtensionError, registry_for
from plangate.activities.tools.mcp.file import CheckDecl, McpFileError, load
from plangate.activities.tools.mcp.probes import judge
from plangate.activities.tools.mcp.templates import TemplateError, fill, fill_arguments
from plangate.client.api import Plangate
from plangate.records.report import RunReport, StepState
from plangate.testing import ended, running_worker, scheduled
from plangate.worker.assembly import build_worker
from plangate.world.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mcp-git.yaml"
CONTENT = "notes of the day\n"
GIT_TOOLS = ("git.create_branch", "git.checkout", "git.add", "git.commit")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with a first commit on main and an untracked notes.txt."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "plans@example.com")
    git(path, "config", "user.name", "plangate tests")
    (path / "README.md").write_text("first\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "first")
    (path / "notes.txt").write_text(CONTENT)
    return path


def servers_file(tmp_path: Path, command: list[str], more: dict[str, Any] | None = None,
                 example: Path = EXAMPLE, server_name: str = "git") -> Path:
    """The example file, its server started by ``command``, with ``more`` tools added."""
    declared = yaml.safe_load(example.read_text())
    server = declared["servers"][server_name]
    server["command"] = command
    server["tools"].update(more or {})
    path = tmp_path / f"mcp-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(declared, sort_keys=False))
    return path


def direct(repo: Path) -> list[str]:
    return [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]


def with_file(settings: Settings, path: Path, patience_s: float | None = None) -> Settings:
    s = replace(settings, catalogue=replace(settings.catalogue, mcp_servers=str(path)))
    if patience_s is not None:
        s = replace(s, runs=replace(s.runs, outage_patience_s=patience_s))
    return s


def branch_plan(repo: Path, branch: str, message: str, approve_add: bool = False) -> dict[str, Any]:
    at = str(repo)
    add: dict[str, Any] = {"n": 3, "tool": "git.add", "depends_on": [2],
                           "args": {"repo_path": at, "path": "notes.txt"}}
    if approve_add:
        add["approval"] = "required"
    return {"goal": "commit today's notes on a branch", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "git.create_branch", "on_unmet": "halt",
         "args": {"repo_path": at, "branch_name": branch, "base_branch": "main"}},
        {"n": 2, "tool": "git.checkout", "depends_on": [1], "on_unmet": "halt",
         "args": {"repo_path": at, "branch_name": branch}},
        add,
        {"n": 4, "tool": "git.commit", "depends_on": [3], "on_unmet": "halt",
         "args": {"repo_path": at, "message": message},
         "post": [{"probe": "git.file_at", "repo_path": at,
                   "revision": f"{branch}:notes.txt", "content": CONTENT}]},
    ]}


def tool_calls(calls: dict[str, int]) -> dict[str, int]:
    return {name: n for name, n in calls.items() if name.startswith("git.")}


async def test_a_plan_acts_through_the_server_and_is_read_back_then_skipped(
        client, settings, repo, tmp_path):
    s = with_file(settings, servers_file(tmp_path, direct(repo)))
    branch, message = f"notes-{uuid.uuid4().hex[:6]}", "today's notes"
    async with running_worker(client, s) as runs:
        report = await runs.run(branch_plan(repo, branch, message))
        assert report.status == "succeeded", (report.failure, [x.reason for x in report.steps])
        assert [x.state for x in report.steps] == [StepState.DONE] * 4
        # each post condition was a fresh read through the server's read tools, and held
        post = {c.condition.probe: c.outcome.value for x in report.steps for r in x.checks
                if r.phase == "post" for c in r.results}
        assert post == {"git.branch_exists": "holds", "git.on_branch": "holds",
                        "git.indexed": "holds", "git.head_message": "holds",
                        "git.file_at": "holds"}
        # before the add, the index read answered with an error: violated, never a pass
        (before_add,) = [c for r in report.step(3).checks if r.phase == "skip+pre"
                         for c in r.results if c.condition.probe == "git.indexed"]
        assert before_add.outcome.value == "violated"
        assert "git_show answered with an error" in before_add.detail
        # one tool call per step in the history
        assert tool_calls(await scheduled(client, report.run_id)) == dict.fromkeys(GIT_TOOLS, 1)

        # git itself: the branch, checked out, its newest commit holding the file
        assert branch in git(repo, "branch", "--list", branch)
        assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == branch
        assert git(repo, "log", "-1", "--format=%s", branch).strip() == message
        assert git(repo, "show", f"{branch}:notes.txt") == CONTENT
        head = git(repo, "rev-parse", branch)

        # the same plan again: every step skipped as done, no git tool called
        again = await runs.run(branch_plan(repo, branch, message))
        assert again.status == "succeeded", again.failure
        assert [x.state for x in again.steps] == [StepState.SKIPPED] * 4
        assert all("already holds" in x.reason for x in again.steps), [x.reason for x in
                                                                       again.steps]
        assert tool_calls(await scheduled(client, again.run_id)) == {}
    assert git(repo, "rev-parse", branch) == head
    assert git(repo, "rev-list", "--count", branch).strip() == "2"


async def test_a_tool_that_acts_not_fails_its_post_check(client, settings, repo, tmp_path):
    """``git.commit_unchecked`` is mapped to the server's git_status: it answers, no error, and
    commits nothing. Its contract's post condition reads the log: the run does not succeed."""
    fake = {"git.commit_unchecked": {
        "tool": "git_status", "effect": "write",
        "args": {"repo_path": "string", "message": "string"},
        "call": {"repo_path": "{repo_path}"},
        "contract": {"post": [{"probe": "git.head_message", "identifies": True,
                               "from_args": {"repo_path": "repo_path", "message": "message"}}]},
    }}
    s = with_file(settings, servers_file(tmp_path, direct(repo), fake))
    git(repo, "add", "notes.txt")
    before = git(repo, "rev-parse", "HEAD")
    plan = {"goal": "commit the notes", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "git.commit_unchecked", "on_unmet": "halt",
         "args": {"repo_path": str(repo), "message": "the notes"}}]}
    async with running_worker(client, s) as runs:
        report = await runs.run(plan)
        calls = tool_calls(await scheduled(client, report.run_id))
    assert report.status != "succeeded"
    assert report.failure is not None and report.failure.step == 1
    assert "git.head_message" in report.failure.detail, report.failure
    assert "Message: the notes" in report.failure.detail  # what it looked for, not found
    assert calls == {"git.commit_unchecked": 1}  # it was called, and said nothing was wrong
    assert git(repo, "rev-parse", "HEAD") == before


async def test_a_tool_error_is_a_tool_failure_with_the_servers_message(client, settings, repo,
                                                                         tmp_path):
    s = with_file(settings, servers_file(tmp_path, direct(repo)))
    plan = {"goal": "switch", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "git.checkout", "on_unmet": "halt",
         "args": {"repo_path": str(repo), "branch_name": "no-such-branch"}}]}
    async with running_worker(client, s) as runs:
        report = await runs.run(plan)
    assert report.status != "succeeded"
    assert report.failure is not None and report.failure.code == "tool_error"
    assert not report.failure.retryable
    assert "git_checkout" in report.failure.detail and "no-such-branch" in report.failure.detail
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"


def launcher(tmp_path: Path, repo: Path) -> tuple[list[str], Path, Path]:
    """A launcher the test controls: it records the server's pid, and fails (exit 1) once the
    ``stopped`` file exists."""
    pid, stopped = tmp_path / "server.pid", tmp_path / "stopped"
    script = tmp_path / "git-server.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'[ -e "{stopped}" ] && exit 1\n'
        f'echo $$ > "{pid}"\n'
        f'exec "{sys.executable}" -m mcp_server_git --repository "{repo}"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return [str(script)], pid, stopped


def kill_server(pid: Path, stop: Path | None) -> None:
    """SIGKILL the server; with ``stop``, its launcher fails from now on."""
    if stop is not None:
        stop.touch()
    os.kill(int(pid.read_text()), signal.SIGKILL)


async def run_killing_at_approval(runs, api: Plangate, plan: dict[str, Any], pid: Path,
                                  stop: Path | None) -> tuple[RunReport, set[StepState]]:
    """Run ``plan``; when step 3 waits for its approval, kill the server (and with ``stop``,
    keep it from starting again), then approve. The states step 3 went through."""
    handle = await runs.start(plan)
    killed = False
    seen: set[StepState] = set()
    async for rep in api.poll(handle.id, every_s=0.1):
        seen.add(rep.step(3).state)
        for card in rep.approvals:
            if card.status == "pending" and not killed:
                kill_server(pid, stop)
                await asyncio.sleep(0.3)
                killed = True
                await api.approve(handle.id, card.step, card.digest, by="erin")
    final: RunReport = await ended(handle)
    return final, seen


async def test_a_server_gone_mid_run_is_waited_for_then_halts(client, settings, repo, tmp_path):
    command, pid, stopped = launcher(tmp_path, repo)
    s = with_file(settings, servers_file(tmp_path, command), patience_s=4)
    branch = f"down-{uuid.uuid4().hex[:6]}"
    async with running_worker(client, s) as runs:
        report, seen = await run_killing_at_approval(
            runs, Plangate(client, runs.settings), branch_plan(repo, branch, "m", True), pid,
            stopped)
        calls = tool_calls(await scheduled(client, report.run_id))
    assert report.status == "halted", report.failure
    assert report.failure is not None and report.failure.step == 3
    assert report.failure.code == "system_unavailable"
    assert "MCP server git" in report.failure.detail, report.failure.detail
    assert StepState.WAITING in seen
    step3 = report.step(3)
    assert StepState.WAITING in {t.state for t in step3.transitions}
    assert step3.state == StepState.HALTED and report.step(4).state == StepState.VOID
    # steps 1 and 2 acted; nothing after the server went away was called
    assert calls == {"git.create_branch": 1, "git.checkout": 1}
    assert git(repo, "rev-list", "--count", branch).strip() == "1"


async def test_a_server_killed_once_is_reconnected(client, settings, repo, tmp_path):
    command, pid, _ = launcher(tmp_path, repo)
    s = with_file(settings, servers_file(tmp_path, command), patience_s=30)
    branch = f"back-{uuid.uuid4().hex[:6]}"
    async with running_worker(client, s) as runs:
        first = pid.read_text() if pid.exists() else ""
        report, _ = await run_killing_at_approval(
            runs, Plangate(client, runs.settings), branch_plan(repo, branch, "again", True), pid,
            None)
    assert report.status == "succeeded", (report.failure, [x.reason for x in report.steps])
    assert pid.read_text() != first  # a new server process
    assert git(repo, "log", "-1", "--format=%s", branch).strip() == "again"
    assert git(repo, "show", f"{branch}:notes.txt") == CONTENT


# -- refused before anything runs ------------------------------------------------------------

BAD = {
    "unknown effect": ("effect: write\n", "effect: writes\n", 1,
                       "servers.git.tools.git.create_branch.effect: must be one of read, "
                       "write, external, money"),
    "missing tool name": ("        tool: git_checkout\n", "", 1,
                          "servers.git.tools.git.checkout.tool: is required"),
    "unknown probe in a contract": ("probe: git.indexed\n", "probe: git.in_index\n", 1,
                                    "servers.git.tools.git.add.contract.post.0.probe: no probe "
                                    "named 'git.in_index'"),
    "bad JSON path": ("check: {present: true}\n", "check: {present: true, path: '$.a[x'}\n",
                      1, "servers.git.probes.git.indexed.check.path: JSON path '$.a[x' is "
                      "malformed"),
    "template of no argument": ('check: {contains: "{branch}"}\n',
                                'check: {contains: "{brunch}"}\n', 1,
                                "servers.git.probes.git.branch_exists.check.contains: {brunch} "
                                "is not one of its arguments"),
}


def broken(tmp_path: Path, case: str) -> tuple[Path, int, str]:
    """The example with one line changed; the line it is reported at, and the message."""
    old, new, count, message = BAD[case]
    text = EXAMPLE.read_text()
    assert old in text
    line_no = text[: text.index(old)].count("\n") + 1
    if not new:  # the field is gone: reported at its entry's key, the line above
        line_no -= 1
    path = tmp_path / "mcp.yaml"
    path.write_text(text.replace(old, new, count))
    return path, line_no, message


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_file_is_refused_with_line_and_field(tmp_path, case):
    path, line_no, message = broken(tmp_path, case)
    with pytest.raises(McpFileError) as e:
        load(str(path), known_probes={"local_file_nonempty"})
    assert f"mcp.yaml line {line_no}, {message}" in str(e.value)


def check(plan: dict[str, Any], servers: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``python -m plangate check plan.json``, as users run it."""
    at = tmp_path / "plan.json"
    at.write_text(json.dumps(plan))
    env = {**os.environ, "PLANGATE_MCP_SERVERS": str(servers)}
    return subprocess.run([sys.executable, "-m", "plangate", "check", str(at)], env=env,
                          capture_output=True, text=True, timeout=60)


def test_check_refuses_a_bad_file_and_starts_nothing(tmp_path, repo):
    marker = tmp_path / "server-started"
    path, line_no, message = broken(tmp_path, "unknown effect")
    text = path.read_text().replace(
        "command: [python, -m, mcp_server_git, --repository, /srv/repo]",
        f'command: [sh, -c, "touch {marker}; exec {sys.executable} -m mcp_server_git"]')
    path.write_text(text)
    done = check(branch_plan(repo, "b", "m"), path, tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"mcp.yaml line {line_no}, {message}" in done.stderr
    assert not marker.exists()


def test_check_names_the_step_and_field_of_a_bad_argument(tmp_path, repo):
    marker = tmp_path / "server-started"
    path = servers_file(tmp_path, ["sh", "-c", f"touch {marker}"])
    plan = branch_plan(repo, "b", "m")
    plan["steps"][1]["args"]["branch_name"] = 7
    plan["steps"][2]["args"]["files"] = ["notes.txt"]
    done = check(plan, path, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "step 2, field args.branch_name: Input should be a valid string" in done.stderr
    assert "step 3, field args.files: Extra inputs are not permitted" in done.stderr
    assert check(branch_plan(repo, "b", "m"), path, tmp_path).returncode == 0
    assert not marker.exists()


async def test_a_worker_refuses_a_tool_its_server_does_not_list(client, settings, repo,
                                                                tmp_path):
    ghost = {"git.rebase": {"tool": "git_rebase", "effect": "write",
                            "args": {"repo_path": "string"}}}
    s = with_file(settings, servers_file(tmp_path, direct(repo), ghost))
    assert "git.rebase" in registry_for(s.catalogue).tools  # check knows it, unconnected
    with pytest.raises(ExtensionError, match="does not list git_rebase"):
        await build_worker(client, s, bootstrap=False)


# -- templates and judgements, no server ------------------------------------------------------

def test_templates_substitute_values_and_never_evaluate():
    values: dict[str, JsonValue] = {"path": "a{b}.txt", "files": ["x", "y"], "n": 3,
                                    "gone": None}
    assert fill_arguments({"files": "{files}", "rev": ":{path}", "n": "{n}", "opt": "{gone}",
                           "k": "fixed"}, values) == {
        "files": ["x", "y"], "rev": ":a{b}.txt", "n": 3, "k": "fixed"}
    assert fill("{n} of {files}", values) == '3 of ["x", "y"]'
    with pytest.raises(TemplateError, match="gone"):
        fill("at {gone}", values)


@pytest.mark.parametrize(("check", "doc", "holds"), [
    ({"contains": "On branch {b}\n"}, "On branch main\nclean", True),
    ({"contains": "On branch {b}\n"}, "On branch main-2\nclean", False),
    ({"not_contains": "{b}"}, "* main", False),
    ({"path": "$.items", "contains": "{b}"}, {"items": ["main"]}, True),
    ({"path": "$.state", "equals": "open"}, {"state": "open"}, True),
    ({"path": "$.state", "equals": "open"}, {}, False),
    ({"path": "$.id", "present": True}, {"id": None}, False),
    ({"path": "$.id", "present": False}, {}, True),
])
def test_a_judgement_compares_never_matches(check, doc, holds):
    verdict = judge(CheckDecl.model_validate(check), doc, {"b": "main"})
    assert verdict.holds is holds, verdict


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def http_server(repo: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The git server's own tools served over streamable HTTP: its URL and process."""
    port = free_port()
    code = ("import sys; from pathlib import Path; from mcp_server_git.server import "
            "create_server; create_server(Path(sys.argv[1])).run("
            "transport='streamable-http', host='127.0.0.1', port=int(sys.argv[2]))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(repo), str(port)],
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.kill()
        proc.wait()


async def test_a_server_over_streamable_http(client, settings, repo, tmp_path, http_server):
    declared = yaml.safe_load(EXAMPLE.read_text())
    server = declared["servers"]["git"]
    del server["command"]
    url, proc = http_server
    server["url"] = url
    path = tmp_path / "mcp-http.yaml"
    path.write_text(yaml.safe_dump(declared))
    s = with_file(settings, path, patience_s=3)
    branch = f"http-{uuid.uuid4().hex[:6]}"
    def plan(name: str) -> dict[str, Any]:
        return {"goal": "a branch", "budget": {"replans_max": 0}, "steps": [
            {"n": 1, "tool": "git.create_branch", "on_unmet": "halt",
             "args": {"repo_path": str(repo), "branch_name": name, "base_branch": "main"}}]}

    async with running_worker(client, s) as runs:
        report = await runs.run(plan(branch))
        assert report.status == "succeeded", report.failure
        assert branch in git(repo, "branch", "--list", branch)
        # the server gone: its steps wait, then halt
        proc.kill()
        proc.wait()
        down = await runs.run(plan(branch + "-2"))
    assert down.status == "halted", down.failure
    assert down.failure is not None and down.failure.code == "system_unavailable"
    assert StepState.WAITING in {t.state for t in down.step(1).transitions}
