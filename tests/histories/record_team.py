"""Records the histories of guarded team runs for the replay test (``tests/test_replay_team.py``):
the example team's own workflows (examples/temporal_team), its OpenAI Agents SDK agent and its
pydantic-ai agent (``TemporalDurability``), and the LangGraph graph of examples/langgraph_team
(``temporalio-langgraph``), each on a worker with ``plangate.temporal.PlangatePlugin``, each
with a card approved, a refusal and a halt. The agents' models are scripted: the Agents SDK's
in process, pydantic-ai's and the graph's over HTTP (``plangate.testing.FakeOpenAI``). What
the guard's workflow side writes into a team's history is then committed, and a change to it
that would break a team's run in flight fails the replay (docs/versioning.md). Run by hand to
add a path, never to make a failing replay pass:

    .venv/bin/python -m tests.histories.record_team            # the paths not recorded yet
    .venv/bin/python -m tests.histories.record_team NAME ...   # these, again
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "team"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "temporal_team"
GRAPH_EXAMPLE = EXAMPLE.parent / "langgraph_team"
# the teams' packages, ``credits`` and ``refunds``, as their workers have them
sys.path[:0] = [str(EXAMPLE), str(GRAPH_EXAMPLE)]

from credits import activities as team  # noqa: E402
from credits.openai_agent import AgentsSdkSupportWorkflow  # noqa: E402
from credits.pydantic_agent import PydanticAISupportWorkflow  # noqa: E402
from credits.workflows import (  # noqa: E402
    ArchiveWorkflow,
    CarefulArchiveWorkflow,
    CreditWorkflow,
)
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin  # noqa: E402
from refunds import activities as refunds  # noqa: E402
from refunds import graph  # noqa: E402
from refunds.workflows import RefundAgentWorkflow  # noqa: E402
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402
from temporalio.langgraph import LangGraphPlugin  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from bench._stack import Bench, bench_stack  # noqa: E402
from plangate.client.api import Plangate  # noqa: E402
from plangate.temporal import GuardTable, PlangatePlugin  # noqa: E402
from plangate.testing import FakeOpenAI, Reply  # noqa: E402

Scenario = Callable[[Bench], Awaitable[WorkflowHandle[Any, Any]]]
TIMEOUT = timedelta(seconds=120)
# the hand-written workflows, as the team's worker registers them (and the replay test)
WORKFLOWS: list[type] = [ArchiveWorkflow, CarefulArchiveWorkflow, CreditWorkflow]
ACTIVITIES: list[Callable[..., Any]] = [
    team.issue_credit, team.find_credit, team.load_export, team.archive_object]


def table(halt: str | None = None, example: Path = EXAMPLE) -> GuardTable:
    """The example's guard table; ``halt``: that activity's failed check halts the run."""
    loaded = GuardTable.load(example / "guards.yaml")
    if halt is None:
        return loaded
    entry = loaded.activities[halt].model_copy(update={"on_failure": "halt"})
    return loaded.model_copy(update={"activities": {**loaded.activities, halt: entry}})


def guard(b: Bench, halt: str | None = None, example: Path = EXAMPLE) -> PlangatePlugin:
    return PlangatePlugin(table(halt, example), settings=b.settings, principal="support-agent")


@asynccontextmanager
async def team_worker(b: Bench, halt: str | None = None) -> AsyncIterator[tuple[Client, str]]:
    """The team's own client (its pydantic converter) and a worker of its workflows with
    plangate's plugin, on a queue of its own."""
    client = await Client.connect(b.settings.temporal.address,
                                  namespace=b.settings.temporal.namespace,
                                  data_converter=pydantic_data_converter)
    queue = f"team-rec-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=WORKFLOWS, activities=ACTIVITIES,
                      plugins=[guard(b, halt)]):
        yield client, queue


async def ended(handle: WorkflowHandle[Any, Any]) -> WorkflowHandle[Any, Any]:
    try:
        await handle.result()
    except WorkflowFailureError as e:
        print(f"{handle.id} failed: {e.cause}")
    return handle


async def answered(b: Bench, handle: WorkflowHandle[Any, Any], approve: bool,
                   reason: str = "") -> WorkflowHandle[Any, Any]:
    """The run's card approved (or rejected for ``reason``) by a person, then its end."""
    api = Plangate(b.client, b.settings)
    card = await api.wait_for_card(handle.id, timeout=60)
    if approve:
        await api.approve(handle.id, card.step, card.digest, by="bench")
    else:
        await api.reject(handle.id, card.step, card.digest, reason=reason, by="bench")
    return await ended(handle)


def bucket(b: Bench) -> str:
    import boto3

    name = f"team-rec-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=b.settings.world.s3_endpoint_url).create_bucket(Bucket=name)
    return name


async def credit(b: Bench, approve: bool) -> WorkflowHandle[Any, Any]:
    async with team_worker(b) as (client, queue):
        handle = await client.start_workflow(
            CreditWorkflow.run, team.CreditRequest(account_id="acct-rec", amount_cents=2500),
            id=f"credit-{uuid.uuid4().hex[:8]}", task_queue=queue, execution_timeout=TIMEOUT)
        return await answered(b, handle, approve, reason="wrong account")


async def credit_approved(b: Bench) -> WorkflowHandle[Any, Any]:
    """A money call: its card approved, the call made once, its post condition read back."""
    return await credit(b, approve=True)


async def credit_rejected(b: Bench) -> WorkflowHandle[Any, Any]:
    """Its card rejected: refused before any dispatch (``approval_rejected``)."""
    return await credit(b, approve=False)


async def archive_refused(b: Bench) -> WorkflowHandle[Any, Any]:
    """The object to archive is not there: refused at the call (``precondition_failed``), the
    workflow failed with it."""
    async with team_worker(b) as (client, queue):
        return await ended(await client.start_workflow(
            ArchiveWorkflow.run, args=[bucket(b), "absent.csv"],
            id=f"archive-{uuid.uuid4().hex[:8]}", task_queue=queue, execution_timeout=TIMEOUT))


async def archive_halted(b: Bench) -> WorkflowHandle[Any, Any]:
    """The same refusal where the table halts: the workflow fails though its code catches it."""
    async with team_worker(b, halt="archive_object") as (client, queue):
        return await ended(await client.start_workflow(
            CarefulArchiveWorkflow.run, args=[bucket(b), "absent.csv"],
            id=f"careful-{uuid.uuid4().hex[:8]}", task_queue=queue, execution_timeout=TIMEOUT))


# -- the OpenAI Agents SDK agent -------------------------------------------------------------

@asynccontextmanager
async def agents_worker(b: Bench, replies: list[Any], halt: str | None = None
                        ) -> AsyncIterator[tuple[Client, str]]:
    """The agent's client (Temporal's OpenAI plugin, its model scripted) and a worker of the
    example's agent workflow with plangate's plugin."""
    from temporalio.openai_agents import ModelActivityParameters
    from temporalio.openai_agents.testing import AgentEnvironment

    from tests.scripted_agents import ScriptedAgentsModel

    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    params = ModelActivityParameters(start_to_close_timeout=timedelta(seconds=30))
    async with AgentEnvironment(model=ScriptedAgentsModel(replies), model_params=params) as env:
        client = env.applied_on_client(await Client.connect(
            b.settings.temporal.address, namespace=b.settings.temporal.namespace))
        queue = f"agents-rec-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=queue, workflows=[AgentsSdkSupportWorkflow],
                          activities=ACTIVITIES, plugins=[guard(b, halt)]):
            yield client, queue


def tool_call(name: str, args: dict[str, Any]) -> Any:
    from temporalio.openai_agents.testing import ResponseBuilders

    return ResponseBuilders.tool_call(json.dumps(args), name, call_id=f"call-{name}")


def said(text: str) -> Any:
    from temporalio.openai_agents.testing import ResponseBuilders

    return ResponseBuilders.output_message(text)


async def agents_credit_approved(b: Bench) -> WorkflowHandle[Any, Any]:
    """The model asks for a credit: its card approved, the credit made once."""
    replies = [tool_call("issue_credit", {"req": {"account_id": "acct-rec", "amount_cents": 2500,
                                                  "reason": "late delivery"}}),
               said("The credit is made.")]
    async with agents_worker(b, replies) as (client, queue):
        handle = await client.start_workflow(
            AgentsSdkSupportWorkflow.run, "Credit acct-rec 25.00 for the late delivery.",
            id=f"agents-credit-{uuid.uuid4().hex[:8]}", task_queue=queue,
            execution_timeout=TIMEOUT)
        return await answered(b, handle, approve=True)


def export(b: Bench) -> dict[str, Any]:
    return {"req": {"bucket": bucket(b), "key": "export.csv", "rows": 3}}


async def agents_export(b: Bench, halt: str | None) -> WorkflowHandle[Any, Any]:
    replies = [tool_call("load_export", export(b)), said("The export did not land.")]
    team.BROKEN_EXPORT["on"] = True  # the export answers ok and writes nothing
    try:
        async with agents_worker(b, replies, halt) as (client, queue):
            return await ended(await client.start_workflow(
                AgentsSdkSupportWorkflow.run, "Load the export.",
                id=f"agents-export-{uuid.uuid4().hex[:8]}", task_queue=queue,
                execution_timeout=TIMEOUT))
    finally:
        team.BROKEN_EXPORT["on"] = False


async def agents_export_refused(b: Bench) -> WorkflowHandle[Any, Any]:
    """The export answers ok and wrote nothing: its post condition fails on a fresh read
    (``postcondition_unmet``), answered to the model, which says so."""
    return await agents_export(b, halt=None)


async def agents_export_halted(b: Bench) -> WorkflowHandle[Any, Any]:
    """The same where the table halts: the agent's workflow fails."""
    return await agents_export(b, halt="load_export")


# -- the agents whose models answer over HTTP: pydantic-ai's and the LangGraph graph's ---------

# plangate's OpenAI-compatible test model, where pydantic-ai's model activity and the graph's
# ``agent`` node reach it (``main`` starts it and sets their variables); each scenario scripts
# exactly the replies its run takes, ``main`` checks none is left over
MODEL = FakeOpenAI()


def model_env(base_url: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-test-recording",
            "TEAM_MODEL": "fake-model", "LANGSMITH_TRACING": "false"}


@asynccontextmanager
async def pydantic_ai_worker(b: Bench, halt: str | None = None
                             ) -> AsyncIterator[tuple[Client, str]]:
    """The agent's client (pydantic-ai's plugin) and a worker of the example's pydantic-ai
    workflow (``TemporalDurability``) with plangate's plugin."""
    client = await Client.connect(b.settings.temporal.address,
                                  namespace=b.settings.temporal.namespace,
                                  plugins=[PydanticAIPlugin()])
    queue = f"pydantic-ai-rec-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[PydanticAISupportWorkflow],
                      activities=ACTIVITIES, plugins=[guard(b, halt)]):
        yield client, queue


async def pydantic_ai_credit(b: Bench, approve: bool) -> WorkflowHandle[Any, Any]:
    MODEL.add(Reply.calling("issue_credit", {"account_id": "acct-rec", "amount_cents": 1999,
                                             "reason": "damaged parcel"}),
              "Done: I said what the tool answered.")
    async with pydantic_ai_worker(b) as (client, queue):
        handle = await client.start_workflow(
            PydanticAISupportWorkflow.run, "Credit acct-rec 19.99: damaged parcel.",
            id=f"pydantic-ai-credit-{uuid.uuid4().hex[:8]}", task_queue=queue,
            execution_timeout=TIMEOUT)
        return await answered(b, handle, approve, reason="the parcel arrived intact")


async def pydantic_ai_credit_approved(b: Bench) -> WorkflowHandle[Any, Any]:
    """The model asks for a credit: its card approved, the credit made once, the model told."""
    return await pydantic_ai_credit(b, approve=True)


async def pydantic_ai_credit_rejected(b: Bench) -> WorkflowHandle[Any, Any]:
    """Its card rejected: no dispatch, plangate's reason (``approval_rejected``) answered to the
    model (``ToolFailed``), which says so; the workflow completes."""
    return await pydantic_ai_credit(b, approve=False)


async def pydantic_ai_export_halted(b: Bench) -> WorkflowHandle[Any, Any]:
    """The export answers ok and wrote nothing: its post condition fails on a fresh read
    (``postcondition_unmet``) where the table halts: the workflow fails, the model is not
    asked again."""
    MODEL.add(Reply.calling("load_export", export(b)["req"]))
    team.BROKEN_EXPORT["on"] = True
    try:
        async with pydantic_ai_worker(b, halt="load_export") as (client, queue):
            return await ended(await client.start_workflow(
                PydanticAISupportWorkflow.run, "Load the export.",
                id=f"pydantic-ai-export-{uuid.uuid4().hex[:8]}", task_queue=queue,
                execution_timeout=TIMEOUT))
    finally:
        team.BROKEN_EXPORT["on"] = False


@asynccontextmanager
async def graph_worker(b: Bench, halt: str | None = None) -> AsyncIterator[tuple[Client, str]]:
    """The team's client and a worker of examples/langgraph_team's graph, LangGraph's plugin
    and plangate's (its own guard table), plangate's last, as the example's worker has them."""
    client = await Client.connect(b.settings.temporal.address,
                                  namespace=b.settings.temporal.namespace,
                                  data_converter=pydantic_data_converter)
    queue = f"langgraph-rec-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[RefundAgentWorkflow],
                      activities=[refunds.issue_refund, refunds.find_refund],
                      plugins=[LangGraphPlugin(graphs={graph.NAME: graph.build()}),
                               guard(b, halt, GRAPH_EXAMPLE)]):
        yield client, queue


async def langgraph_refund(b: Bench, approve: bool, halt: str | None = None
                           ) -> WorkflowHandle[Any, Any]:
    replies: list[Any] = [Reply.calling("issue_refund", {
        "order_id": "order-rec", "amount_cents": 1250, "reason": "arrived broken"})]
    if halt is None:  # the model answers the tool's answer; a halted run never asks it again
        replies.append("Done: I said what the tool answered.")
    MODEL.add(*replies)
    async with graph_worker(b, halt) as (client, queue):
        handle = await client.start_workflow(
            RefundAgentWorkflow.run, "Refund 12.50 of order-rec: it arrived broken.",
            id=f"langgraph-refund-{uuid.uuid4().hex[:8]}", task_queue=queue,
            execution_timeout=TIMEOUT)
        return await answered(b, handle, approve, reason="the order was never paid")


async def langgraph_refund_approved(b: Bench) -> WorkflowHandle[Any, Any]:
    """The graph's ``tools`` node calls the team's ``issue_refund`` with the model's arguments:
    its card approved, the refund made once, the model told."""
    return await langgraph_refund(b, approve=True)


async def langgraph_refund_rejected(b: Bench) -> WorkflowHandle[Any, Any]:
    """Its card rejected: no dispatch, plangate's reason (``approval_rejected``) the tool's
    answer to the model, which says so; the workflow completes."""
    return await langgraph_refund(b, approve=False)


async def langgraph_refund_halted(b: Bench) -> WorkflowHandle[Any, Any]:
    """Its card rejected where the table halts ``issue_refund``: the workflow fails
    (``approval_rejected``) though the node answers the refusal to the model."""
    return await langgraph_refund(b, approve=False, halt="issue_refund")


SCENARIOS: dict[str, Scenario] = {
    "credit_approved": credit_approved,
    "credit_rejected": credit_rejected,
    "archive_refused": archive_refused,
    "archive_halted": archive_halted,
    "agents_credit_approved": agents_credit_approved,
    "agents_export_refused": agents_export_refused,
    "agents_export_halted": agents_export_halted,
    "pydantic_ai_credit_approved": pydantic_ai_credit_approved,
    "pydantic_ai_credit_rejected": pydantic_ai_credit_rejected,
    "pydantic_ai_export_halted": pydantic_ai_export_halted,
    "langgraph_refund_approved": langgraph_refund_approved,
    "langgraph_refund_rejected": langgraph_refund_rejected,
    "langgraph_refund_halted": langgraph_refund_halted,
}


async def save(name: str, handle: WorkflowHandle[Any, Any]) -> None:
    history = await handle.fetch_history()
    record = {"workflow_id": handle.id, "history": json.loads(history.to_json())}
    HERE.mkdir(exist_ok=True)
    (HERE / f"{name}.json").write_text(json.dumps(record))
    print(f"recorded team/{name}")


async def main(names: list[str]) -> None:
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise SystemExit(f"no such scenario: {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    if not names:
        names = [n for n in SCENARIOS if not (HERE / f"{n}.json").exists()]
    async with bench_stack() as b:
        # the teams' Postgres and S3: the stack's
        team_env: dict[str, str] = {"TEAM_DATABASE_URL": b.env["PLANGATE_DATABASE_URL"],
                                    "TEAM_S3_ENDPOINT_URL": b.env["PLANGATE_S3_ENDPOINT_URL"]}
        os.environ.update(team_env)
        await team.ensure_schema()
        await refunds.ensure_schema()
        with MODEL:
            os.environ.update(model_env(MODEL.base_url))
            for name in names:
                handle = await SCENARIOS[name](b)
                if MODEL.remaining:
                    raise SystemExit(f"{name}: {MODEL.remaining} scripted replies not taken")
                await save(name, handle)


if __name__ == "__main__":
    os.chdir(HERE.parent.parent.parent)
    asyncio.run(main(sys.argv[1:]))
