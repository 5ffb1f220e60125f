"""Agents on Temporal whose tools are the team's own guarded activities (issue 37): an OpenAI
Agents SDK agent (Temporal's ``temporalio.openai_agents``, its tools made by plangate's
``guarded_tool``) and a pydantic-ai agent (``TemporalDurability``, tools that call the team's
activities from the workflow), each from the example project (examples/temporal_team/credits),
each on a scripted model that keeps what it was given.

For each: a credit the model asks for waits for a card naming the arguments the model chose, no
credit made until a credentialed approval, then exactly one; an export that answers ok and
writes nothing is caught by its post condition (a fresh S3 read), and the model's next turn
reads plangate's reason. Real Temporal, Postgres and S3: what is asserted is in the world
(credit rows, objects), in the workflows' histories and in what the model received."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from agents.items import TResponseInputItem
from credits import activities as team
from credits.openai_agent import AgentsSdkSupportWorkflow
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from temporalio.client import Client, WorkflowFailureError
from temporalio.openai_agents import ModelActivityParameters
from temporalio.openai_agents.testing import AgentEnvironment, ResponseBuilders
from temporalio.worker import Worker

from plangate.client.api import Plangate
from plangate.temporal import PlangatePlugin
from plangate.testing import attempts, scheduled
from plangate.world.settings import Settings
from tests.scripted_agents import (
    SCRIPTS,
    Script,
    ScriptedAgentsModel,
    ScriptedPydanticAISupportWorkflow,
    ScriptedTemporalAgentWorkflow,
)
from tests.temporal_team import EXAMPLE, bucket, team_env

__all__ = ["bucket", "team_env"]  # the fixtures, shared by the plangate.temporal tests

ACTIVITIES: list[Callable[..., Any]] = [team.issue_credit, team.find_credit, team.load_export]
RUN_TIMEOUT = timedelta(seconds=120)


@pytest.fixture(autouse=True)
def no_agents_traces(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Agents SDK sends no traces from a test (to OpenAI, where a key is set)."""
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")


@pytest_asyncio.fixture(loop_scope="session")
async def team_address(settings: Settings, team_env: None) -> str:
    await team.ensure_schema()
    return settings.temporal.address


@pytest.fixture
def broken_export() -> Iterator[None]:
    """The export answers ok and writes nothing, for this test only."""
    before = team.BROKEN_EXPORT["on"]
    team.BROKEN_EXPORT["on"] = True
    yield
    team.BROKEN_EXPORT["on"] = before


def guard(settings: Settings) -> PlangatePlugin:
    return PlangatePlugin(EXAMPLE / "guards.yaml", settings=settings, principal="support-agent")


async def credits_of(pg: psycopg.AsyncConnection[Any], account: str) -> list[tuple[Any, ...]]:
    cur = await pg.execute(
        "SELECT credit_id, amount_cents FROM team.credits WHERE account_id = %s", (account,))
    return list(await cur.fetchall())


def causes(error: BaseException) -> list[str]:
    """A workflow failure's causes, outermost first."""
    out, e = [], getattr(error, "cause", None)
    while e is not None:
        out.append(f"{type(e).__name__}: {e}")
        e = getattr(e, "cause", None)
    return out


def tool_outputs(model_input: str | list[TResponseInputItem]) -> list[str]:
    """The tool results an Agents SDK model's input carries back to it."""
    assert isinstance(model_input, list)
    items: list[dict[str, Any]] = [dict(item) for item in model_input]
    return [str(item["output"]) for item in items if item.get("type") == "function_call_output"]


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    """The tool results a pydantic-ai model's request carries back to it."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    return [p for p in last.parts if isinstance(p, ToolReturnPart)]


# -- the OpenAI Agents SDK -----------------------------------------------------------------------

@asynccontextmanager
async def agents_sdk_worker(address: str, settings: Settings, model: ScriptedAgentsModel
                            ) -> AsyncIterator[tuple[Client, str]]:
    """The team's client for the Agents SDK agent (Temporal's default converter, which the
    OpenAI plugin takes over; the model scripted) and a worker of the example's workflow with
    plangate's plugin, on a queue of its own."""
    params = ModelActivityParameters(start_to_close_timeout=timedelta(seconds=30))
    async with AgentEnvironment(model=model, model_params=params) as env:
        team_client = env.applied_on_client(
            await Client.connect(address, namespace=settings.temporal.namespace))
        queue = f"agents-sdk-{uuid.uuid4().hex[:8]}"
        async with Worker(team_client, task_queue=queue, workflows=[AgentsSdkSupportWorkflow],
                          activities=ACTIVITIES, plugins=[guard(settings)]):
            yield team_client, queue


@pytest.mark.asyncio(loop_scope="session")
async def test_an_agents_sdk_agent_s_credit_waits_for_a_card_and_credits_once(
    team_address: str, settings: Settings, client: Client, pg: psycopg.AsyncConnection[Any],
) -> None:
    account = f"acct-{uuid.uuid4().hex[:8]}"
    chosen = {"req": {"account_id": account, "amount_cents": 2500, "reason": "late delivery"}}
    model = ScriptedAgentsModel([
        ResponseBuilders.tool_call(json.dumps(chosen), "issue_credit", call_id="call-credit"),
        ResponseBuilders.output_message("The credit is made."),
    ])
    wf = f"agents-sdk-credit-{uuid.uuid4().hex[:8]}"
    async with agents_sdk_worker(team_address, settings, model) as (team_client, queue):
        handle = await team_client.start_workflow(
            AgentsSdkSupportWorkflow.run, f"Credit {account} 25.00 for the late delivery.",
            id=wf, task_queue=queue, execution_timeout=RUN_TIMEOUT)
        api = Plangate(client, settings)  # plangate's own client answers the team's run
        card = await api.wait_for_card(wf, timeout=60)
        assert card.card.tool == "issue_credit"
        assert card.card.args == chosen["req"]  # what the model chose, as the activity gets it
        assert await credits_of(pg, account) == []
        assert (await scheduled(team_client, wf))["issue_credit"] == 0
        assert len(model.inputs) == 1  # the tool call waits: the model has no answer yet

        await api.approve(wf, card.step, card.digest)
        assert await handle.result() == "The credit is made."
        rows = await credits_of(pg, account)
        assert [amount for _, amount in rows] == [2500]
        ran = await scheduled(team_client, wf)
        assert ran["issue_credit"] == 1 and ran["invoke_model_activity"] == 2
        (said,) = tool_outputs(model.inputs[1])
        assert rows[0][0] in said  # the model's next turn read the credit that was made


@pytest.mark.asyncio(loop_scope="session")
async def test_an_agents_sdk_agent_reads_why_its_export_did_not_hold(
    team_address: str, settings: Settings, bucket: str, s3: Any, broken_export: None,
) -> None:
    key = f"export-{uuid.uuid4().hex[:8]}.csv"
    chosen = {"req": {"bucket": bucket, "key": key, "rows": 3}}
    model = ScriptedAgentsModel([
        ResponseBuilders.tool_call(json.dumps(chosen), "load_export", call_id="call-export"),
        ResponseBuilders.output_message("The export did not land; I told the team."),
    ])
    wf = f"agents-sdk-export-{uuid.uuid4().hex[:8]}"
    async with agents_sdk_worker(team_address, settings, model) as (team_client, queue):
        said_last = await team_client.execute_workflow(
            AgentsSdkSupportWorkflow.run, f"Load the export into {bucket}/{key}.", id=wf,
            task_queue=queue, execution_timeout=RUN_TIMEOUT)
        assert said_last == "The export did not land; I told the team."
        # the activity ran and said ok; nothing was written; the fresh read after it saw so
        ran = await scheduled(team_client, wf)
        # read in the activity the instant after; the workflow reads itself (once) only where
        # that read could not answer (a loaded machine: its time bound passed)
        assert ran["load_export"] == 1 and ran["plangate.guard.read"] <= 1
        assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    # the model's next turn: the tool's answer is plangate's reason
    assert len(model.inputs) == 2
    (said,) = tool_outputs(model.inputs[1])
    assert "postcondition_unmet" in said and "object_exists" in said, said
    assert key in said, said
    assert "postcondition_unmet" in json.dumps(model.inputs[1])


# -- pydantic-ai ---------------------------------------------------------------------------------

PYDANTIC_AI_WORKFLOWS: list[Any] = [ScriptedPydanticAISupportWorkflow,
                                    ScriptedTemporalAgentWorkflow]


@asynccontextmanager
async def pydantic_ai_worker(address: str, settings: Settings
                             ) -> AsyncIterator[tuple[Client, str]]:
    """The team's client for the pydantic-ai agent (its plugin's converter) and a worker of the
    example's agent on the scripted model, with plangate's plugin, on a queue of its own."""
    team_client = await Client.connect(address, namespace=settings.temporal.namespace,
                                       plugins=[PydanticAIPlugin()])
    queue = f"pydantic-ai-{uuid.uuid4().hex[:8]}"
    async with Worker(team_client, task_queue=queue,
                      workflows=PYDANTIC_AI_WORKFLOWS, activities=ACTIVITIES,
                      plugins=[guard(settings)]):
        yield team_client, queue


@pytest.fixture
def script() -> Iterator[str]:
    """The workflow id of a pydantic-ai run, and its script (set by the test)."""
    wf = f"pydantic-ai-{uuid.uuid4().hex[:8]}"
    yield wf
    SCRIPTS.pop(wf, None)


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("agent_workflow", PYDANTIC_AI_WORKFLOWS,
                         ids=["TemporalDurability", "TemporalAgent"])
async def test_a_pydantic_ai_agent_s_credit_waits_for_a_card_and_credits_once(
    team_address: str, settings: Settings, client: Client, pg: psycopg.AsyncConnection[Any],
    script: str, agent_workflow: Any,
) -> None:
    account = f"acct-{uuid.uuid4().hex[:8]}"
    chosen = {"account_id": account, "amount_cents": 1999, "reason": "damaged parcel"}
    wf = script
    run = SCRIPTS[wf] = Script([
        ModelResponse(parts=[ToolCallPart("issue_credit", chosen, tool_call_id="call-credit")]),
        ModelResponse(parts=[TextPart("The credit is made.")]),
    ])
    async with pydantic_ai_worker(team_address, settings) as (team_client, queue):
        handle = await team_client.start_workflow(
            agent_workflow.run, f"Credit {account} 19.99: damaged parcel.",
            id=wf, task_queue=queue, execution_timeout=RUN_TIMEOUT)
        api = Plangate(client, settings)
        card = await api.wait_for_card(wf, timeout=60)
        assert card.card.tool == "issue_credit"
        assert card.card.args == chosen
        assert await credits_of(pg, account) == []
        assert (await scheduled(team_client, wf))["issue_credit"] == 0
        assert len(run.seen) == 1

        await api.approve(wf, card.step, card.digest)
        assert await handle.result() == "The credit is made."
        rows = await credits_of(pg, account)
        assert [amount for _, amount in rows] == [1999]
        ran = await scheduled(team_client, wf)
        assert ran["issue_credit"] == 1
        (said,) = tool_returns(run.seen[1])
        assert said.tool_name == "issue_credit" and rows[0][0] in said.model_response_str()


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("agent_workflow", PYDANTIC_AI_WORKFLOWS,
                         ids=["TemporalDurability", "TemporalAgent"])
async def test_a_pydantic_ai_agent_reads_why_its_export_did_not_hold(
    team_address: str, settings: Settings, bucket: str, s3: Any, broken_export: None,
    script: str, agent_workflow: Any,
) -> None:
    key = f"export-{uuid.uuid4().hex[:8]}.csv"
    chosen = {"bucket": bucket, "key": key, "rows": 3}
    wf = script
    run = SCRIPTS[wf] = Script([
        ModelResponse(parts=[ToolCallPart("load_export", chosen, tool_call_id="call-export")]),
        ModelResponse(parts=[TextPart("The export did not land; I told the team.")]),
    ])
    async with pydantic_ai_worker(team_address, settings) as (team_client, queue):
        said_last = await team_client.execute_workflow(
            agent_workflow.run, f"Load the export into {bucket}/{key}.",
            id=wf, task_queue=queue, execution_timeout=RUN_TIMEOUT)
        assert said_last == "The export did not land; I told the team."
        ran = await scheduled(team_client, wf)
        # read in the activity the instant after; the workflow reads itself (once) only where
        # that read could not answer (a loaded machine: its time bound passed)
        assert ran["load_export"] == 1 and ran["plangate.guard.read"] <= 1
        assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    assert len(run.seen) == 2
    (said,) = tool_returns(run.seen[1])
    assert said.tool_name == "load_export" and said.outcome == "failed"
    text = said.model_response_str()
    assert "postcondition_unmet" in text and "object_exists" in text, text
    assert key in text, text


@pytest.mark.asyncio(loop_scope="session")
async def test_a_failure_of_the_team_s_own_is_not_answered_as_the_guard_s(
    team_address: str, settings: Settings,
) -> None:
    """``guarded_tool`` answers the model only what the guard refused: an export into a bucket
    that does not exist fails in the team's own code, and the agent's workflow fails as
    Temporal's ``activity_as_tool`` makes it (the model is not asked again)."""
    missing = f"team-agents-missing-{uuid.uuid4().hex[:8]}"
    chosen = {"req": {"bucket": missing, "key": "export.csv", "rows": 1}}
    model = ScriptedAgentsModel([
        ResponseBuilders.tool_call(json.dumps(chosen), "load_export", call_id="call-export"),
        ResponseBuilders.output_message("unreachable"),
    ])
    wf = f"agents-sdk-own-failure-{uuid.uuid4().hex[:8]}"
    async with agents_sdk_worker(team_address, settings, model) as (team_client, queue):
        with pytest.raises(WorkflowFailureError) as failed:
            await team_client.execute_workflow(
                AgentsSdkSupportWorkflow.run, "Load the export.", id=wf, task_queue=queue,
                execution_timeout=RUN_TIMEOUT)
        assert (await attempts(team_client, wf))["load_export"] == [3]  # the team's retries
    chain = causes(failed.value)
    assert "AgentsWorkflowError" in chain[0] and any("NoSuchBucket" in c for c in chain), chain
    assert not any("plangate refused" in c for c in chain), chain
    assert len(model.inputs) == 1
