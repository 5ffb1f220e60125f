"""Every recorded history of a guarded team run (``tests/histories/team/``, recorded by
``tests/histories/record_team.py``) replays against the current code of the guard's workflow
side with ``PlangatePlugin`` in place: a change to ``plangate.temporal`` that would break a
team's run in flight fails here (docs/versioning.md). Each file is a path named below: a file no
path names, or a path with no file, fails the test."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from plangate.records.interface import APPROVE_UPDATE, REJECT_UPDATE, TEAM_CHECK_ACTIVITY
from plangate.temporal import PlangatePlugin
from plangate.testing import local_activity
from plangate.world.settings import Settings
from tests.histories.record_team import EXAMPLE, WORKFLOWS

HISTORIES = sorted((Path(__file__).parent / "histories" / "team").glob("*.json"))
E = EventType

# each path: how its execution ended (completed, or failed with plangate's code as the
# failure's type), and what the guard wrote into it that the path is for
PATHS: dict[str, tuple[str, str]] = {
    # the hand-written workflows (examples/temporal_team/credits/workflows.py)
    "credit_approved": ("completed", APPROVE_UPDATE),
    "credit_rejected": ("approval_rejected", REJECT_UPDATE),
    "archive_refused": ("precondition_failed", "archive_object"),
    "archive_halted": ("precondition_failed", "archive_object"),
    # the OpenAI Agents SDK agent (examples/temporal_team/credits/openai_agent.py)
    "agents_credit_approved": ("completed", APPROVE_UPDATE),
    "agents_export_refused": ("completed", "load_export"),
    "agents_export_halted": ("postcondition_unmet", "load_export"),
}


def load(path: Path) -> WorkflowHistory:
    record = json.loads(path.read_text())
    return WorkflowHistory.from_json(record["workflow_id"], record["history"])


def ending(events: list[HistoryEvent]) -> str:
    last = events[-1]
    if last.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        return "completed"
    assert last.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, E.Name(last.event_type)
    return str(last.workflow_execution_failed_event_attributes.failure.application_failure_info
               .type)


def marks(events: list[HistoryEvent]) -> set[str]:
    """The Updates accepted and the activities scheduled in a history."""
    out: set[str] = set()
    for e in events:
        if e.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            out.add(e.workflow_execution_update_accepted_event_attributes.accepted_request
                    .input.name)
        elif e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            out.add(e.activity_task_scheduled_event_attributes.activity_type.name)
    return out


def test_every_team_path_was_recorded() -> None:
    recorded = {p.stem: p for p in HISTORIES}
    assert set(recorded) == set(PATHS), (
        sorted(set(PATHS) - set(recorded)), sorted(set(recorded) - set(PATHS)))
    for name, (end, mark) in PATHS.items():
        events = list(load(recorded[name]).events)
        assert ending(events) == end, name
        assert mark in marks(events), (name, mark)
        # no workflow task failed: a refusal or a halt fails the workflow, never its task
        assert not [e for e in events if e.event_type == E.EVENT_TYPE_WORKFLOW_TASK_FAILED], name
        # a credit asks a person: decided in the workflow first (a local activity), its card
        # published after a settle timer, then waited on (a timer with its summary)
        checked = [la for e in events if (la := local_activity(e)) is not None
                   and la["activity_type"] == TEAM_CHECK_ACTIVITY]
        waits = [e.user_metadata.summary.data.decode() for e in events
                 if e.event_type == E.EVENT_TYPE_TIMER_STARTED]
        if "credit" in name:
            assert checked and len(waits) == 2, name
            assert waits[1] == '"plangate: card of issue_credit (call 1) waits"', name
    halted = load(recorded["archive_halted"]).events[-1]
    failure = halted.workflow_execution_failed_event_attributes.failure
    assert failure.message.startswith("plangate halted archive_object: precondition_failed")
    refused = load(recorded["archive_refused"]).events[-1]
    failure = refused.workflow_execution_failed_event_attributes.failure
    assert failure.cause.activity_failure_info.scheduled_event_id > 0  # the SDK's, not forged


def replayer(name: str) -> Replayer:
    guard = PlangatePlugin(EXAMPLE / "guards.yaml", settings=Settings(),
                           principal="support-agent")
    if not name.startswith("agents_"):
        return Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter,
                        plugins=[guard])
    from credits.openai_agent import AgentsSdkSupportWorkflow
    from temporalio.openai_agents import OpenAIAgentsPlugin

    return Replayer(workflows=[AgentsSdkSupportWorkflow], plugins=[OpenAIAgentsPlugin(), guard])


@pytest.fixture
def no_agents_traces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_team_replay(path: Path, no_agents_traces: Any) -> None:
    history = await asyncio.to_thread(load, path)
    await replayer(path.stem).replay_workflow(history)


async def test_a_team_history_does_not_replay_without_the_guard() -> None:
    """What the guard wrote is in the history: the team's workflows alone do not replay it."""
    history = await asyncio.to_thread(load, Path(__file__).parent / "histories" / "team"
                                      / "credit_approved.json")
    bare = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    result = await bare.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is not None
