"""`plangate mcp` and `plangate worker --check` started as users start them (processes): the one
stderr line naming where runs go and how clients are told apart (a client that hands the server
a minimal environment learns it got the defaults), never a key or a token; the missing `mcp`
extra named with its install line (exit 2); `worker --check` connecting to the back-door
servers as the worker does, listing their tools, and refusing (exit 2) a file the worker
refuses."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from plangate.records.signing import SigningKey

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mcp-filesystem.yaml"
SERVER = ROOT / "tests" / "node" / "node_modules" / ".bin" / "mcp-server-filesystem"
DEFAULTS = ("plangate mcp: Temporal localhost:7233 (the default), namespace default "
            "(the default), task queue plangate (the default); clients: ")
# what a client that says nothing about its environment hands the server (Claude Desktop's
# style: the command and an explicit env, little else)
MINIMAL = {"PATH": os.environ["PATH"]}
BLOCKER = """\
import sys

BLOCKED = {blocked!r}


class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, Absent())
"""


def minimal(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**MINIMAL, "HOME": str(tmp_path), **extra}


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts, ended by it (each by its own handle) whatever happens."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def launch(procs: list[subprocess.Popen[str]], env: dict[str, str], cwd: Path,
           *args: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-m", "plangate", "mcp", *args], env=env, cwd=cwd,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    procs.append(p)
    return p


def test_stdio_with_a_minimal_environment_names_the_defaults(tmp_path, started):
    p = launch(started, minimal(tmp_path), tmp_path)
    assert p.stderr is not None
    line = p.stderr.readline()
    assert line == DEFAULTS + ("stdio: one client, the server's own submitter key "
                               "(none: PLANGATE_SUBMITTER_KEY unset)\n")
    out, err = p.communicate("", timeout=60)  # the client goes (stdin closed): the server ends
    assert p.returncode == 0, err
    assert out == ""  # stdout is the protocol's: nothing else was written there


def test_stdio_names_what_it_was_given_never_a_key(stack, tmp_path, started):
    submitter, approver = SigningKey.generate("agent-7"), SigningKey.generate("erin")
    queue = f"mcp-start-{uuid.uuid4().hex[:6]}"
    env = minimal(tmp_path, **stack.env(), PLANGATE_TASK_QUEUE=queue,
                  PLANGATE_SUBMITTER_KEY=submitter.text(), PLANGATE_APPROVER_KEY=approver.text())
    p = launch(started, env, tmp_path)
    out, err = p.communicate("", timeout=60)
    assert p.returncode == 0, err
    assert err.splitlines()[:2] == [
        f"plangate mcp: Temporal {stack.temporal_address}, namespace {stack.namespace} "
        f"(the default), task queue {queue}; clients: stdio: one client, the server's own "
        "submitter key (agent-7)",
        "plangate mcp: warning: PLANGATE_APPROVER_KEY is set in this server's environment; an "
        "MCP server never approves: give its client an env without it",
    ]
    for key in (submitter, approver):
        assert key.text().split(":", 1)[1] not in err + out


@pytest.mark.parametrize(("token", "scheme"), [
    (None, "no token (--insecure-local): every local process is one client"),
    pytest.param(secrets.token_urlsafe(32), "one bearer token (PLANGATE_MCP_TOKEN): one client, "
                 "the server's submitter key", id="a token"),  # random: each worker alike
])
def test_http_names_its_client_identity_never_the_token(tmp_path, started, token, scheme):
    env = minimal(tmp_path, **({"PLANGATE_MCP_TOKEN": token} if token else {}))
    args = ["--http", "--port", "0"] + ([] if token else ["--insecure-local"])
    p = launch(started, env, tmp_path, *args)
    assert p.stderr is not None and p.stdout is not None
    assert p.stderr.readline() == DEFAULTS + scheme + "\n"
    assert p.stdout.readline().startswith("plangate mcp: http://127.0.0.1:")
    p.terminate()
    out, err = p.communicate(timeout=60)
    if token:
        assert token not in out + err


@pytest.mark.parametrize(("blocked", "args"), [
    ("starlette", ()), ("mcp", ()), ("uvicorn", ("--http", "--insecure-local", "--port", "0")),
])
def test_without_the_mcp_extra_one_line_names_the_install(tmp_path, blocked, args):
    """The extra's modules made absent (a sitecustomize on PYTHONPATH that finds none of them),
    the command run as users run it."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(BLOCKER.format(blocked={blocked}))
    done = subprocess.run(
        [sys.executable, "-m", "plangate", "mcp", *args], env=minimal(tmp_path,
                                                                      PYTHONPATH=str(shim)),
        cwd=tmp_path, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done
    assert done.stderr == (f"plangate: mcp: the MCP SDK is not installed ({blocked} is "
                           "missing): pip install 'plangate[mcp]'\n")
    assert done.stdout == ""


def servers_file(tmp_path: Path, more_tools: dict[str, Any] | None = None,
                 more_probes: dict[str, Any] | None = None) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir(exist_ok=True)
    declared = yaml.safe_load(EXAMPLE.read_text())
    server = declared["servers"]["files"]
    server["command"] = [str(SERVER), str(shared)]
    server["tools"].update(more_tools or {})
    server["probes"].update(more_probes or {})
    path = tmp_path / f"mcp-fs-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(declared, sort_keys=False))
    return path


def worker_check(stack: Any, tmp_path: Path, servers: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **stack.env(), "PLANGATE_MCP_SERVERS": str(servers),
           "PLANGATE_TASK_QUEUE": f"check-{uuid.uuid4().hex[:6]}"}
    return subprocess.run([sys.executable, "-m", "plangate", "worker", "--check"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_worker_check_lists_the_back_door_servers_tools(stack, tmp_path):
    if not SERVER.exists():
        pytest.fail(f"{SERVER} is missing: install the npm peers (scripts/_node.sh)")
    done = worker_check(stack, tmp_path, servers_file(tmp_path))
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("plangate: MCP server")]
    where = f"{SERVER} {tmp_path / 'shared'}"
    head, _, guarded = line.partition("; guarded here: ")
    assert head.startswith(f"plangate: MCP server files ({where}) lists 14 tools: ")
    assert {"read_text_file", "write_file", "move_file"} <= set(head.split(": ")[-1].split(", "))
    assert guarded == "files.write (write_file), files.read (read_text_file)"


@pytest.mark.parametrize(("tools", "probes", "why"), [
    ({"files.delete": {"tool": "delete_file", "effect": "write", "args": {"path": "string"}}},
     {}, "does not list delete_file, which {file} declares on it (it lists: "),
    ({}, {"files.sneaky": {"tool": "write_file", "args": {"path": "string"},
                           "call": {"path": "{path}", "content": ""},
                           "check": {"present": True}}},
     "says the read tool of probe(s) files.sneaky (write_file) is not read-only: a probe "
     "only reads"),
])
def test_worker_check_refuses_what_the_worker_refuses(stack, tmp_path, tools, probes, why):
    """Both passed `--check` before it connected (exit 0); the worker refuses both at start."""
    path = servers_file(tmp_path, tools, probes)
    done = worker_check(stack, tmp_path, path)
    assert done.returncode == 2, done
    where = f"{SERVER} {tmp_path / 'shared'}"
    prefix = f"plangate: MCP servers of {path}: MCP server files "
    if why.startswith("does not list"):
        prefix += f"({where}) "
    # (the server's own stderr passes through: its lines are its own)
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("plangate:")]
    assert line.startswith(prefix + why.format(file=path)), done.stderr
    assert "plangate: MCP server files" not in done.stdout
