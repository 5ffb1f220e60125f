"""A LangGraph graph on Temporal (``temporalio-langgraph``) whose refund tool is the team's own
activity, guarded by plangate (examples/langgraph_team): the model is ``langchain-openai``'s
chat model, over HTTP to plangate's OpenAI-compatible test model.

The refund the model asks for waits for a card naming the arguments it chose, no refund made
until a person approves, then exactly one refund and one ledger row; a rejected card makes no
refund and no ledger row, and the model's next request carries plangate's reason; arguments
the model got wrong are answered to it (``bad arguments``), not run and not carded. Real Temporal,
Postgres and S3: what is asserted is in the world (refund rows, ledger rows), in the workflow's
history and in what the model was sent over HTTP."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from refunds import activities as team
from refunds import graph
from refunds.workflows import RefundAgentWorkflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.langgraph import LangGraphPlugin
from temporalio.worker import Replayer, Worker

from plangate.client.api import Plangate
from plangate.temporal import PlangatePlugin
from plangate.testing import FakeOpenAI, Reply, scheduled
from plangate.world.settings import Settings
from tests.temporal_team import ledger_of, tool_results

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "langgraph_team"
RUN_TIMEOUT = timedelta(seconds=120)


@pytest_asyncio.fixture(loop_scope="session")
async def team_db(stack: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(team.WORLD_VAR, stack.env()["PLANGATE_DATABASE_URL"])
    await team.ensure_schema()


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """The OpenAI-compatible test model, where the graph's ``agent`` activity reaches it."""
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-langgraph")
        monkeypatch.setenv("TEAM_MODEL", "fake-model")
        monkeypatch.setenv("LANGSMITH_TRACING", "false")
        yield fake


def plugins(settings: Settings) -> list[Any]:
    """LangGraph's plugin and plangate's, plangate's last, as the example's worker has them."""
    guard = PlangatePlugin(EXAMPLE / "guards.yaml", settings=settings, principal="support-agent")
    return [LangGraphPlugin(graphs={graph.NAME: graph.build()}), guard]


@asynccontextmanager
async def refund_worker(settings: Settings) -> AsyncIterator[tuple[Client, str]]:
    """The team's client and a worker of the example's graph, on a queue of its own."""
    team_client = await Client.connect(settings.temporal.address,
                                       namespace=settings.temporal.namespace,
                                       data_converter=pydantic_data_converter)
    queue = f"langgraph-{uuid.uuid4().hex[:8]}"
    async with Worker(team_client, task_queue=queue, workflows=[RefundAgentWorkflow],
                      activities=[team.issue_refund, team.find_refund],
                      plugins=plugins(settings)):
        yield team_client, queue


async def refunds_of(pg: psycopg.AsyncConnection[Any], order: str) -> list[tuple[Any, ...]]:
    cur = await pg.execute(
        "SELECT refund_id, amount_cents FROM team.refunds WHERE order_id = %s", (order,))
    return list(await cur.fetchall())


def script(order: str) -> tuple[dict[str, Any], list[Any]]:
    chosen = {"order_id": order, "amount_cents": 1250, "reason": "arrived broken"}
    return chosen, [Reply.calling("issue_refund", chosen), "Done: I said what the tool answered."]


@pytest.mark.asyncio(loop_scope="session")
async def test_a_graph_s_refund_waits_for_a_card_and_refunds_once(
    team_db: None, model: FakeOpenAI, settings: Settings, client: Client,
    pg: psycopg.AsyncConnection[Any],
) -> None:
    order = f"order-{uuid.uuid4().hex[:8]}"
    chosen, replies = script(order)
    model.add(*replies)
    wf = f"langgraph-refund-{uuid.uuid4().hex[:8]}"
    async with refund_worker(settings) as (team_client, queue):
        handle = await team_client.start_workflow(
            RefundAgentWorkflow.run, f"Refund 12.50 of {order}: it arrived broken.",
            id=wf, task_queue=queue, execution_timeout=RUN_TIMEOUT)
        api = Plangate(client, settings)  # plangate's own client answers the team's run
        card = await api.wait_for_card(wf, timeout=60)
        assert card.card.tool == "issue_refund"
        assert card.card.args == chosen  # what the model chose, as the activity gets it
        assert await refunds_of(pg, order) == [] and await ledger_of(pg, wf) == []
        assert len(model.completions) == 1  # the tool call waits: the model has no answer yet

        await api.approve(wf, card.step, card.digest)
        assert await handle.result() == "Done: I said what the tool answered."
        rows = await refunds_of(pg, order)
        assert [amount for _, amount in rows] == [1250]
        assert await ledger_of(pg, wf) == [
            ("issue_refund", "money", "done", Decimal("12.50"), "support-agent")]
        ran = await scheduled(team_client, wf)
        assert ran["issue_refund"] == 1 and ran[f"{graph.NAME}.agent"] == 2
        # the guarded graph's history (card, Update, guard's local activities) replays as it ran
        history = await handle.fetch_history()
    replayer = Replayer(workflows=[RefundAgentWorkflow], data_converter=pydantic_data_converter,
                        plugins=plugins(settings))
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None, replayed.replay_failure
    (said,) = tool_results(model.completions[1])
    assert rows[0][0] in said and "refunded 1250 cents" in said, said


@pytest.mark.asyncio(loop_scope="session")
async def test_a_rejected_refund_is_not_made_and_the_model_reads_why(
    team_db: None, model: FakeOpenAI, settings: Settings, client: Client,
    pg: psycopg.AsyncConnection[Any],
) -> None:
    order = f"order-{uuid.uuid4().hex[:8]}"
    _, replies = script(order)
    model.add(Reply.calling("issue_refund", {"order_id": order}), *replies)  # no amount first
    wf = f"langgraph-rejected-{uuid.uuid4().hex[:8]}"
    async with refund_worker(settings) as (team_client, queue):
        handle = await team_client.start_workflow(
            RefundAgentWorkflow.run, f"Refund 12.50 of {order}.", id=wf, task_queue=queue,
            execution_timeout=RUN_TIMEOUT)
        api = Plangate(client, settings)
        card = await api.wait_for_card(wf, timeout=60)
        await api.reject(wf, card.step, card.digest, reason="the order was never paid")
        assert await handle.result() == "Done: I said what the tool answered."
        ran = await scheduled(team_client, wf)
        assert ran["issue_refund"] == 0 and ran[f"{graph.NAME}.agent"] == 3
    assert await refunds_of(pg, order) == [] and await ledger_of(pg, wf) == []
    # the call the model could not have meant is answered to it, not run, and no card is made
    assert tool_results(model.completions[1]) == ["bad arguments: amount_cents: Field required"]
    said = tool_results(model.completions[2])[-1]
    assert said.startswith("plangate refused issue_refund: approval_rejected"), said
    assert "the order was never paid" in said, said
