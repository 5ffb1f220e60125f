"""A second real MCP server as a back-door server: the reference filesystem server (npm
`@modelcontextprotocol/server-filesystem`, pinned in tests/node), declared by
examples/mcp-filesystem.yaml, on a real worker. Its `write_file(path, content)` takes a path of
its own: plangate confines the local paths of its own tools to its work directory, never a
back-door tool's arguments. The write guarded (its post condition read back through the
server's `read_text_file`, a field probe through the tool's reader, whose ENOENT the file
declares `not_found`), the file on disk, and the same plan again skipped as done with no
write."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from plangate.activities.catalogue import plan_problems
from plangate.client.api import Plangate
from plangate.client.checked import Checked
from plangate.plans.load import parse_plan
from plangate.plans.model import Plan
from plangate.records.report import StepState
from plangate.testing import history_events, local_activity, payload_json, running_worker, scheduled
from plangate.world.settings import Settings
from tests import test_mcp_back as back

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mcp-filesystem.yaml"
SERVER = ROOT / "tests" / "node" / "node_modules" / ".bin" / "mcp-server-filesystem"
CONTENT = "minutes of the Tuesday review\n"
# a tool whose arguments are named as plangate's own local paths are: still the server's
MOVE = {"files.move": {"tool": "move_file", "effect": "write",
                       "args": {"source": "string", "destination": "string"}}}


@pytest.fixture(scope="module")
def server_bin() -> Path:
    if not SERVER.exists():
        pytest.fail(f"{SERVER} is missing: install the npm peers (scripts/_node.sh)")
    return SERVER


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """The one directory the server may touch, outside plangate's work directory."""
    path = tmp_path / "shared"
    path.mkdir()
    return path.resolve()


def servers_file(tmp_path: Path, command: list[str], more: dict[str, Any] | None = None) -> Path:
    return back.servers_file(tmp_path, command, more, EXAMPLE, "files")


def with_file(settings: Settings, path: Path) -> Settings:
    return replace(settings, catalogue=replace(settings.catalogue, mcp_servers=str(path)))


def write_plan(path: Path, content: str) -> dict[str, Any]:
    return {"goal": "file the review's minutes", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "files.write", "on_unmet": "halt",
         "args": {"path": str(path), "content": content},
         # read through the tool's reader (files.read: read_text_file), not its answer
         "post": [{"probe": "field_equals", "path": "$.structured.content",
                   "value": content}]}]}


async def reads_in_history(client: Client, run_id: str) -> list[tuple[str, str, str]]:
    """Every probe result the run's history records, in order: (the activity that read it,
    the probe, its outcome), from completed activities' results and local activities' markers
    (payloads under 64 KiB are plain JSON)."""
    types: dict[int, str] = {}
    out: list[tuple[str, str, str]] = []
    for e in await history_events(client, run_id):
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            types[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            a = e.activity_task_completed_event_attributes
            out += [(types[a.scheduled_event_id], *r)
                    for p in a.result.payloads for r in _results(payload_json(p))]
        elif (local := local_activity(e)) is not None:
            result = e.marker_recorded_event_attributes.details.get("result")
            out += [(local["activity_type"], *r) for p in (result.payloads if result else [])
                    for r in _results(payload_json(p))]
    return out


def _results(doc: Any) -> list[tuple[str, str]]:
    """The (probe, outcome) of every probe result in a JSON document."""
    if isinstance(doc, list):
        return [r for x in doc for r in _results(x)]
    if not isinstance(doc, dict):
        return []
    if isinstance(doc.get("condition"), dict) and "outcome" in doc:
        return [(doc["condition"]["probe"], doc["outcome"])]
    return [r for x in doc.values() for r in _results(x)]


def problems_of(settings: Settings, plan: dict[str, Any]) -> list[str]:
    return [str(p) for p in plan_problems(Plan.model_validate(plan), settings.catalogue,
                                          settings.world)]


def test_plangates_own_paths_are_confined_a_servers_are_not(settings, tmp_path, shared):
    s = with_file(settings, servers_file(tmp_path, ["mcp-server-filesystem", str(shared)],
                                         MOVE))
    workdir = s.world.workdir
    outside = str(shared / "minutes.txt")
    assert not Path(outside).is_relative_to(workdir.resolve())

    # plangate's own file tools and file probe: confined, each refusal naming step and field
    own = {"goal": "fetch", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": "drops", "key": "k.csv", "dest": outside}},
        {"n": 2, "tool": "s3.put", "depends_on": [1],
         "args": {"bucket": "drops", "key": "k2.csv", "source": outside},
         "post": [{"probe": "local_file_nonempty", "path": outside}]},
    ]}
    refused = f"{outside!r} is outside the work directory {workdir}"
    assert problems_of(s, own) == [
        f"step 1, field args.dest: {refused}",
        f"step 2, field args.source: {refused}",
        f"step 2, field post[0].path: {refused}",
    ]

    # the server's tools: `path`, `source` (and the server's own probe's `path`) are its own
    theirs = {"goal": "file", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "files.write", "args": {"path": outside, "content": CONTENT},
         "pre": [{"probe": "files.holds", "path": "/etc/hostname", "content": "x"}]},
        {"n": 2, "tool": "files.move", "depends_on": [1],
         "args": {"source": outside, "destination": "/elsewhere/minutes.txt"}},
    ]}
    assert problems_of(s, theirs) == []
    # without the file, the same names are plangate's tools' arguments no longer: unknown
    assert problems_of(settings, theirs)[0] == (
        "step 1, field tool: unknown tool 'files.write'")


async def test_the_servers_write_is_guarded_read_back_and_skipped_again(
        client, settings, tmp_path, shared, server_bin):
    s = with_file(settings, servers_file(tmp_path, [str(server_bin), str(shared)]))
    target = shared / f"minutes-{uuid.uuid4().hex[:6]}.txt"
    async with running_worker(client, s) as runs:
        report = await runs.run(write_plan(target, CONTENT))
        assert report.status == "succeeded", (report.failure, [x.reason for x in report.steps])
        step = report.step(1)
        assert step.state == StepState.DONE
        # before the write: the file absent, the server's read an error: violated, no pass;
        # through the reader, its ENOENT is the file's not_found: no record, violated
        before = [(c.condition.probe, c.outcome.value, c.detail) for r in step.checks
                  if r.phase == "skip+pre" for c in r.results]
        assert [b[:2] for b in before] == [("files.holds", "violated"),
                                           ("field_equals", "violated")], before
        assert "read_text_file answered with an error: ENOENT" in before[0][2]
        assert before[1][2].startswith("no record to read: files.read: read_text_file: ENOENT")
        # after it: fresh reads through read_text_file, the probe's and the reader's
        post = [(c.condition.probe, c.outcome.value) for r in step.checks if r.phase == "post"
                for c in r.results]
        assert post == [("files.holds", "holds"), ("field_equals", "holds")]
        assert (await scheduled(client, report.run_id))["files.write"] == 1
        # in the history: read before the call (violated), and the instant after it (holds)
        assert await reads_in_history(client, report.run_id) == [
            ("guard.resolve", "files.holds", "violated"),
            ("guard.resolve", "field_equals", "violated"),
            ("files.write", "files.holds", "holds"), ("files.write", "field_equals", "holds")]

        # the world: the file the server wrote, with the content
        assert target.read_text() == CONTENT
        written = target.stat()

        # the same plan again: skipped as done, the server's write never called
        again = await runs.run(write_plan(target, CONTENT))
        assert again.status == "succeeded", again.failure
        assert again.step(1).state == StepState.SKIPPED
        assert "already holds" in again.step(1).reason, again.step(1).reason
        second = await scheduled(client, again.run_id)
        assert "files.write" not in second, second
        assert await reads_in_history(client, again.run_id) == [
            ("guard.resolve", "files.holds", "holds"), ("guard.resolve", "field_equals", "holds")]
    now = target.stat()
    assert (now.st_ino, now.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    assert target.read_text() == CONTENT


async def test_the_worker_confines_its_own_tools_paths_whatever_the_client_checked(
        client, settings, tmp_path, shared, server_bin):
    """A start that skipped the client's check (a Checked built by hand): the worker's guard
    judges the paths again from its own catalogue, and refuses s3.get's before any call."""
    s = with_file(settings, servers_file(tmp_path, [str(server_bin), str(shared)]))
    dest = shared / "export.csv"
    outside = str(dest)
    plan = {"goal": "fetch beside the server's files", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": "drops", "key": "k.csv", "dest": outside}}]}
    async with running_worker(client, s) as h:
        api = Plangate(client, h.settings)
        run_id = await api.start(Checked(parse_plan(plan), [], h.settings))
        rep = await api.result(run_id)
        calls = await scheduled(client, run_id)
    assert rep.status == "failed" and rep.failure is not None
    assert rep.failure.code == "bad_plan"
    assert (f"step 1, field args.dest: {outside!r} is outside the work directory "
            f"{s.world.workdir}") in rep.failure.detail, rep.failure.detail
    assert set(calls) == {"guard.resolve"}  # s3.get never scheduled
    assert not dest.exists()

