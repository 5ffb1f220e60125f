"""The worked example of an extension (``examples/tickets``): its tools guard writes to a real
local HTTP tickets service. What happened is read from the service's own request log and from
the Temporal history, never from a status string alone.

The worker loads ``plangate_tickets`` the way a deployment does: named by
``PLANGATE_EXTENSIONS`` (``CatalogueSettings.extensions``), or installed with its
``plangate.extensions`` entry point, which fresh ``plangate`` processes (``check``, ``worker``,
``run``) discover."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import sys
import tomllib
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from plangate_tickets import tools
from tickets_service import OTHER_WRITER, Logged, TicketsService

from plangate import CallContext, ToolError, World
from plangate.records.report import RunReport
from plangate.testing import FakeOpenAI, attempts, running_worker, scheduled
from plangate.world.settings import Settings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TICKETS = EXAMPLES / "tickets"


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[TicketsService]:
    with TicketsService() as svc:
        monkeypatch.setenv("TICKETS_URL", svc.url)
        yield svc


@pytest.fixture
def with_tickets(settings: Settings) -> Settings:
    tickets = replace(settings.catalogue, extensions=("plangate_tickets",))
    return replace(settings, catalogue=tickets)


def new_ticket(service: TicketsService, title: str = "Printer on fire") -> str:
    tid = f"T-{uuid.uuid4().hex[:8]}"
    service.add(tid, title)
    return tid


def triage_plan(tid: str, **update: Any) -> dict[str, Any]:
    """Read the ticket (binding its ETag), then assign it while it is still open, bound to the
    version that read saw."""
    return {"goal": f"take {tid} in hand", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "tickets.get", "effect": "read", "args": {"ticket_id": tid},
         "binds": {"etag": "$.etag"}},
        {"n": 2, "tool": "tickets.update", "depends_on": [1],
         "args": {"ticket_id": tid, "status": "in_progress", "assignee": "dana",
                  "if_match": "${etag}", **update},
         "pre": [{"probe": "ticket_status", "ticket_id": tid, "want": "open"}]},
    ]}


def http(log: list[Logged]) -> list[tuple[str, int]]:
    """The HTTP requests of a log as (method, status); another writer's changes as OTHER."""
    return [("OTHER" if e.by == OTHER_WRITER else e.method, e.status) for e in log]


def after_write(log: list[Logged]) -> list[tuple[str, int]]:
    i = next(i for i, e in enumerate(log) if e.method == "PATCH" and e.by == "http")
    return http(log[i + 1:])


def results(rep: RunReport, n: int, phase: str) -> list[tuple[int, str, str, Any]]:
    """Step n's probe results of ``phase``: (attempt, probe, outcome, observed)."""
    return [
        (c.attempt, r.condition.probe, r.outcome, r.observed)
        for c in rep.step(n).checks if c.phase == phase for r in c.results
    ]


async def test_a_guarded_write_runs_once_and_is_read_back_over_http(
    client, with_tickets, service
):
    tid = new_ticket(service)
    async with running_worker(client, with_tickets) as h:
        rep = await h.run(triage_plan(tid))
    assert rep.status == "succeeded", rep.failure
    # once: one activity, one attempt, one PATCH the service applied, bound to what step 1 read
    assert (await scheduled(client, rep.run_id))["tickets.update"] == 1
    assert (await attempts(client, rep.run_id))["tickets.update"] == [1]
    (patch,) = service.requests("PATCH", tid)
    assert (patch.status, patch.replayed, patch.if_match) == (200, False, f'"{tid}.1"')
    assert patch.idempotency_key and patch.body == {"status": "in_progress", "assignee": "dana"}
    ticket = service.ticket(tid)
    assert (ticket["status"], ticket["assignee"], ticket["version"]) == ("in_progress", "dana", 2)
    # the post check read the ticket back: a GET the service answered after the PATCH, and its
    # answer is what the contract's field probes judged
    assert ("GET", 200) in after_write(service.log)
    assert sorted(results(rep, 2, "post")) == [
        (1, "field_equals", "holds", "dana"),
        (1, "field_equals", "holds", "in_progress"),
    ]


async def test_a_ticket_moved_between_check_and_write_is_re_evaluated(
    client, with_tickets, service
):
    tid = new_ticket(service)
    # another writer closes the ticket after the pre check read it open, before the PATCH lands
    service.interleave(tid, "before", status="closed", assignee="sam")
    async with running_worker(client, with_tickets) as h:
        rep = await h.run(triage_plan(tid))
    # the stale write was refused (412) once, and never tried blindly again
    (patch,) = service.requests("PATCH", tid)
    assert (patch.status, patch.if_match) == (412, f'"{tid}.1"')
    assert (await attempts(client, rep.run_id))["tickets.update"] == [1]
    # 412 -> re-evaluate: the world read again, never a blind second call. The second look
    # finds the ticket closed, so the pre condition fails and nothing more is sent
    assert [(c.phase, c.attempt) for c in rep.step(2).checks] == [
        ("skip+pre", 1), ("re-evaluate", 1),
    ]
    assert (1, "ticket_status", "violated", {"status": "closed", "etag": f'"{tid}.2"'}) in (
        results(rep, 2, "re-evaluate")
    )
    assert (await scheduled(client, rep.run_id))["probe.evaluate"] == 2
    assert after_write(service.log) and set(after_write(service.log)) == {("GET", 200)}
    assert rep.status == "failed" and rep.failure is not None
    assert (rep.failure.step, rep.failure.code) == (2, "precondition_unmet")
    # the other writer's state survives
    ticket = service.ticket(tid)
    assert (ticket["status"], ticket["assignee"], ticket["version"]) == ("closed", "sam", 2)


async def test_field_probes_judge_the_ticket_as_read_back_not_the_tools_answer(
    client, with_tickets, service
):
    tid = new_ticket(service)
    plan = triage_plan(tid)
    # a field the call does not set: only a read of the service can know it
    plan["steps"][1]["post"] = [
        {"probe": "field_equals", "path": "$.title", "value": "Printer on fire"}
    ]
    # another writer reassigns the ticket right after the write, before it is read back
    service.interleave(tid, "after", assignee="sam")
    async with running_worker(client, with_tickets) as h:
        rep = await h.run(plan)
    (patch,) = service.requests("PATCH", tid)
    assert patch.status == 200
    step = rep.step(2)
    assert step.result is not None and step.result["assignee"] == "dana"  # what the tool said
    assert sorted(results(rep, 2, "post")) == [
        (1, "field_equals", "holds", "Printer on fire"),
        (1, "field_equals", "holds", "in_progress"),
        (1, "field_equals", "violated", "sam"),  # what the service holds
    ]
    assert after_write(service.log)[0] == ("OTHER", 200)
    assert ("GET", 200) in after_write(service.log)[1:]
    assert rep.status == "failed" and rep.failure is not None
    assert (rep.failure.step, rep.failure.code) == (2, "postcondition_unmet")
    assert step.state != "DONE"


async def test_an_unknown_ticket_is_not_found_and_not_asked_again(client, with_tickets, service):
    plan = {"goal": "read", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "tickets.get", "effect": "read", "args": {"ticket_id": "T-none"}},
    ]}
    async with running_worker(client, with_tickets) as h:
        rep = await h.run(plan)
    assert rep.failure is not None and (rep.failure.code, rep.failure.status) == ("not_found", 404)
    assert (await attempts(client, rep.run_id))["tickets.get"] == [1]
    assert http(service.log) == [("GET", 404)]


async def test_a_replayed_write_is_not_applied_twice(with_tickets, service):
    tid = new_ticket(service)
    args = tools.UpdateTicket(ticket_id=tid, assignee="dana", if_match=f'"{tid}.1"')
    call = CallContext("run-1", 2, "run-1/v1/2")
    world = World(with_tickets.world)
    try:
        first = await tools.update_ticket(args, world, call)
        again = await tools.update_ticket(args, world, call)  # a retry after a lost answer
        other = CallContext("run-2", 2, "run-2/v1/2")
        with pytest.raises(ToolError) as moved:
            await tools.update_ticket(args, world, other)  # a new call, on a stale version
    finally:
        await world.close()
    assert first == again and service.ticket(tid)["version"] == 2
    assert [(e.status, e.replayed) for e in service.requests("PATCH", tid)] == [
        (200, False), (200, True), (412, False),
    ]
    assert (moved.value.code, moved.value.status) == ("precondition_failed", 412)
    assert moved.value.data == {"ticket_id": tid, "status": 412, "etag": f'"{tid}.2"'}


async def test_a_service_that_does_not_answer_is_unavailable(with_tickets, monkeypatch):
    with TicketsService() as gone:
        url = gone.url
    monkeypatch.setenv("TICKETS_URL", url)
    world = World(with_tickets.world)
    try:
        with pytest.raises(ToolError) as e:
            await tools.get_ticket(
                tools.GetTicket(ticket_id="T-1"), world, CallContext("r", 1, "k")
            )
    finally:
        await world.close()
    assert (e.value.code, e.value.retryable) == ("unavailable", True)
    assert url in e.value.detail


# the public packages beside ``plangate`` itself: the guard of a team's own Temporal activities
PUBLIC = ("plangate.temporal", "plangate.temporal.agents")


def test_the_example_uses_only_the_public_surface():
    """An example imports ``plangate`` itself (or ``plangate.temporal``), never its
    internals."""
    for path in EXAMPLES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            )
            for name in names:
                assert name in PUBLIC or not name.startswith("plangate."), f"{path}: {name}"


# -- installed by entry point -----------------------------------------------------------------


def install_metadata(site: Path, name: str, entry_points: Mapping[str, str]) -> None:
    """What installing a distribution leaves for ``importlib.metadata`` in ``site``: its
    ``.dist-info`` with ``METADATA`` and the ``plangate.extensions`` entry points."""
    dist = site / f"{name.replace('-', '_')}-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    lines = ["[plangate.extensions]", *(f"{k} = {v}" for k, v in entry_points.items())]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A site directory where the example is installed as its pyproject.toml declares it (its
    entry points; the code itself stays in examples/tickets)."""
    project = tomllib.loads((TICKETS / "pyproject.toml").read_text())["project"]
    install_metadata(
        tmp_path / "site", project["name"], project["entry-points"]["plangate.extensions"]
    )
    return tmp_path / "site"


def deployment_env(*paths: Path, **env: str) -> dict[str, str]:
    """This process's environment (the stack's services, TICKETS_URL) for a fresh ``plangate``
    process that imports from ``paths`` and loads no extension by name."""
    out = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PLANGATE_EXTENSIONS")}
    return {**out, "PYTHONPATH": os.pathsep.join(map(str, paths)), **env}


async def plangate(*argv: str, env: Mapping[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "plangate", *argv, env=dict(env),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"plangate {' '.join(argv)} did not end") from None
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@asynccontextmanager
async def worker_process(env: Mapping[str, str], log: Path) -> AsyncIterator[None]:
    """``plangate worker`` in a process of its own, until the block ends."""
    with log.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "plangate", "worker", env=dict(env),
            stdout=asyncio.subprocess.PIPE, stderr=err,
        )
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert b"worker polling" in line, await asyncio.to_thread(log.read_text)
            yield
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)


async def test_check_knows_the_extension_where_its_entry_point_is_installed(site):
    plan = TICKETS / "triage.json"  # the plan of docs/extensions.md
    code, _, err = await plangate("check", str(plan), env=deployment_env(site, TICKETS))
    assert code == 0, err
    code, _, err = await plangate("check", str(plan), env=deployment_env(TICKETS))
    assert code == 2
    assert "step 2, field tool: unknown tool 'tickets.update'" in err
    assert "unknown probe 'ticket_status'" in err


async def test_an_extension_by_module_name_must_be_importable_and_says_so(tmp_path):
    """``PLANGATE_EXTENSIONS`` names a module: where Python cannot import it, one line names
    it and says it must be importable (installed, or on PYTHONPATH); with its directory on
    PYTHONPATH the same command knows its tools."""
    plan = TICKETS / "triage.json"
    named = {"PLANGATE_EXTENSIONS": "plangate_tickets"}
    code, _, err = await plangate("check", str(plan), env=deployment_env(tmp_path, **named))
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line == (
        "plangate: extension PLANGATE_EXTENSIONS module plangate_tickets: no module "
        "'plangate_tickets' here: it must be importable by the plangate process (installed, "
        "or its directory on PYTHONPATH)"
    )
    code, _, err = await plangate("check", str(plan), env=deployment_env(TICKETS, **named))
    assert code == 0, err


async def test_an_installed_extension_runs_in_a_worker_and_the_replanner_is_offered_it(
    client, stack, site, service, tmp_path
):
    tid = new_ticket(service)
    service.write(tid, status="closed")  # closed overnight: step 2's pre condition fails
    plan, run_id = tmp_path / "plan.json", f"ep-{uuid.uuid4().hex[:8]}"
    plan.write_text(json.dumps({**triage_plan(tid), "budget": {"replans_max": 1}}))
    reopen = {"goal": f"take {tid} in hand", "steps": [
        {"n": 1, "tool": "tickets.update",
         "args": {"ticket_id": tid, "status": "in_progress", "assignee": "dana"}},
    ]}
    with FakeOpenAI(responses=[json.dumps(reopen)]) as fake:
        env = deployment_env(
            site, TICKETS, **stack.env(), PLANGATE_TASK_QUEUE=f"ep-{uuid.uuid4().hex[:8]}",
            OPENAI_BASE_URL=fake.base_url,
            OPENAI_API_KEY="sk-test", PLANGATE_MODEL="fake-model",
        )
        async with worker_process(env, tmp_path / "worker.log"):
            code, out, err = await plangate(
                "run", str(plan), "--id", run_id, "--wait", "--json", env=env
            )
        (asked,) = fake.completions
    report = json.loads(out)
    assert code == 0 and report["status"] == "succeeded", err
    assert (report["plan_version"], report["replans_used"]) == (2, 1)
    # the model was handed the deployment's catalogue, the extension's tools and probe in it
    system = asked.messages[0]["content"]
    offered = json.loads(system.split("Catalogue:\n", 1)[1])
    tickets_tools = {t["name"]: t for t in offered["tools"] if t["name"].startswith("tickets.")}
    assert sorted(tickets_tools) == ["tickets.get", "tickets.update"]
    assert tickets_tools["tickets.update"]["field_probes"] is True
    assert "ticket_status" in {p["name"] for p in offered["probes"]}
    # the worker ran the extension's tools: read once, one PATCH (the new plan's), read back
    calls = await scheduled(client, run_id)
    assert (calls["tickets.get"], calls["tickets.update"]) == (1, 1)
    (patch,) = service.requests("PATCH", tid)
    assert (patch.status, patch.if_match) == (200, None)
    assert ("GET", 200) in after_write(service.log)
    ticket = service.ticket(tid)
    assert (ticket["status"], ticket["assignee"]) == ("in_progress", "dana")


CLASHING = """\
from plangate import Effect, ToolArgs, tool


class Args(ToolArgs):
    bucket: str


@tool("s3.get", Args, Effect.READ)
async def fetch(args, world, call):
    return {}
"""


async def test_an_extension_that_clashes_stops_the_deployment_in_one_line(stack, tmp_path):
    (tmp_path / "clashing_tools.py").write_text(CLASHING)
    install_metadata(tmp_path, "clashing-tools", {"clash": "clashing_tools"})
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"goal": "g", "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": "b", "key": "k", "dest": "k"}},
    ]}))
    env = deployment_env(
        tmp_path, **stack.env(), PLANGATE_TASK_QUEUE=f"clash-{uuid.uuid4().hex[:8]}"
    )
    for argv in (["check", str(plan)], ["worker"]):
        code, out, err = await plangate(*argv, env=env)
        assert code == 2, (argv, out, err)
        (line,) = err.strip().splitlines()
        assert "'s3.get'" in line and "activities.tools.s3" in line, line
        assert "clashing_tools" in line and "entry point clash" in line, line
        assert "polling" not in out


def test_the_service_on_a_busy_port_says_so_in_one_line() -> None:
    """Issue 22: its default port is not plangate ui's (8765), and a port already taken is one
    line and exit 2, not a traceback."""
    import socket
    import subprocess

    import tickets_service

    assert tickets_service.DEFAULT_PORT != 8765
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, str(TICKETS / "tickets_service.py"), "--port", str(port)],
            capture_output=True, text=True, timeout=30,
        )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"tickets_service: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(--port picks another)"
    ], proc.stderr
