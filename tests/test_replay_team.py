"""Every recorded history of a guarded team run (``tests/histories/team/``, recorded by
``tests/histories/record_team.py``) replays against the current code of the guard's workflow
side with ``PlangatePlugin`` in place, and each framework's own Temporal plugin as its worker had
it (the Agents SDK's, pydantic-ai's, LangGraph's): a change to ``plangate.temporal`` that would
break a team's run in flight fails here (docs/versioning.md). Without plangate's plugin none
replays. Each file is a path named below: a file no path names, or a path with no file, fails
the test."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.workflow import NondeterminismError

from plangate.records.interface import APPROVE_UPDATE, REJECT_UPDATE, TEAM_CHECK_ACTIVITY
from plangate.temporal import PlangatePlugin
from plangate.testing import local_activity
from plangate.world.settings import Settings
from tests.histories.record_team import EXAMPLE, GRAPH_EXAMPLE, WORKFLOWS

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
    # pydantic-ai's agent on TemporalDurability (examples/temporal_team/credits/pydantic_agent.py)
    "pydantic_ai_credit_approved": ("completed", APPROVE_UPDATE),
    "pydantic_ai_credit_rejected": ("completed", REJECT_UPDATE),
    "pydantic_ai_export_halted": ("postcondition_unmet", "load_export"),
    # the LangGraph graph on temporalio-langgraph (examples/langgraph_team)
    "langgraph_refund_approved": ("completed", APPROVE_UPDATE),
    "langgraph_refund_rejected": ("completed", REJECT_UPDATE),
    "langgraph_refund_halted": ("approval_rejected", REJECT_UPDATE),
}
# what the guarded call's answer told the model, in the input of its next request (an activity)
TOLD: dict[str, str] = {
    "pydantic_ai_credit_approved": "credited 1999 cents to acct-rec",
    "pydantic_ai_credit_rejected": "plangate refused issue_credit: approval_rejected",
    "langgraph_refund_approved": "refunded 1250 cents of order order-rec",
    "langgraph_refund_rejected": "plangate refused issue_refund: approval_rejected",
}
# how a halted path's workflow failed
HALTED: dict[str, str] = {
    "archive_halted": "plangate halted archive_object: precondition_failed",
    "pydantic_ai_export_halted": "plangate halted load_export: postcondition_unmet",
    "langgraph_refund_halted": "plangate halted issue_refund: approval_rejected",
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


def inputs(events: list[HistoryEvent]) -> list[str]:
    """The inputs of the activities scheduled in a history, in order, as text."""
    return [p.data.decode(errors="replace") for e in events
            if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            for p in e.activity_task_scheduled_event_attributes.input.payloads]


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
        carded = ("issue_credit" if "credit" in name else
                  "issue_refund" if "refund" in name else None)
        if carded is not None:
            assert checked and len(waits) == 2, name
            assert waits[1] == f'"plangate: card of {carded} (call 1) waits"', name
        if name in TOLD:
            assert any(TOLD[name] in said for said in inputs(events)), name
    for name, said in HALTED.items():
        halted = load(recorded[name]).events[-1]
        failure = halted.workflow_execution_failed_event_attributes.failure
        assert failure.message.startswith(said), (name, failure.message)
    refused = load(recorded["archive_refused"]).events[-1]
    failure = refused.workflow_execution_failed_event_attributes.failure
    assert failure.cause.activity_failure_info.scheduled_event_id > 0  # the SDK's, not forged


def replayer(name: str, guarded: bool = True) -> Replayer:
    """The path's workflow as its worker ran it: the framework's plugin, and plangate's last
    (with the team's guard table); not ``guarded``, without plangate's plugin, plangate passed
    through the sandbox as the plugin does (the teams' workflow modules import its exceptions):
    only the guard is missing."""
    example = GRAPH_EXAMPLE if name.startswith("langgraph_") else EXAMPLE
    guard = [PlangatePlugin(example / "guards.yaml", settings=Settings(),
                            principal="support-agent")] if guarded else []
    runner = SandboxedWorkflowRunner(restrictions=(
        SandboxRestrictions.default if guarded
        else SandboxRestrictions.default.with_passthrough_modules("plangate")))
    if name.startswith("agents_"):
        from credits.openai_agent import AgentsSdkSupportWorkflow
        from temporalio.openai_agents import OpenAIAgentsPlugin

        return Replayer(workflows=[AgentsSdkSupportWorkflow], workflow_runner=runner,
                        plugins=[OpenAIAgentsPlugin(), *guard])
    if name.startswith("pydantic_ai_"):
        from credits.pydantic_agent import PydanticAISupportWorkflow
        from pydantic_ai.durable_exec.temporal import PydanticAIPlugin

        return Replayer(workflows=[PydanticAISupportWorkflow], workflow_runner=runner,
                        plugins=[PydanticAIPlugin(), *guard])
    if name.startswith("langgraph_"):
        from refunds import graph
        from refunds.workflows import RefundAgentWorkflow
        from temporalio.langgraph import LangGraphPlugin

        return Replayer(workflows=[RefundAgentWorkflow], data_converter=pydantic_data_converter,
                        workflow_runner=runner,
                        plugins=[LangGraphPlugin(graphs={graph.NAME: graph.build()}), *guard])
    return Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter,
                    workflow_runner=runner, plugins=guard)


@pytest.fixture
def model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agents' variables as their workers had them: no Agents SDK traces; an OpenAI key,
    since pydantic-ai builds its model's client in the workflow, from the model's name, before
    the run's first command (without one the workflow fails with a ``UserError`` where the
    history holds a patch marker). No model is called in a replay."""
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-replay")


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_team_replay(path: Path, model_env: None) -> None:
    history = await asyncio.to_thread(load, path)
    await replayer(path.stem).replay_workflow(history)


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_a_team_history_does_not_replay_without_the_guard(
    path: Path, model_env: None,
) -> None:
    """What the guard wrote is in the history: the team's workflows alone (with their
    framework's plugin) do not replay it, the commands differ."""
    history = await asyncio.to_thread(load, path)
    bare = replayer(path.stem, guarded=False)
    result = await bare.replay_workflow(history, raise_on_replay_failure=False)
    assert isinstance(result.replay_failure, NondeterminismError), result.replay_failure
