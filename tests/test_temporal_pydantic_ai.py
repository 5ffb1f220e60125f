"""The example's pydantic-ai agent on Temporal (``TemporalDurability``: examples/temporal_team/
credits/pydantic_agent.py, its workflow as written), its model over HTTP to plangate's
OpenAI-compatible test model (``openai-chat:``, built on the worker from ``OPENAI_BASE_URL``).

A credit the model asks for waits for a card naming the arguments it chose, no credit until a
person approves, then exactly one credit and one ledger row; a rejected card makes no credit and
no ledger row, and the model's next request carries plangate's reason. Real Temporal, Postgres
and S3 (tests/test_temporal_agents.py drives the same agent on a scripted in-process model)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from credits import activities as team
from credits.pydantic_agent import PydanticAISupportWorkflow
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.client import Client
from temporalio.worker import Worker

from plangate.client.api import Plangate
from plangate.temporal import PlangatePlugin
from plangate.testing import FakeOpenAI, Reply, scheduled
from plangate.world.settings import Settings
from tests.temporal_team import EXAMPLE, ledger_of, team_env, tool_results

__all__ = ["team_env"]

RUN_TIMEOUT = timedelta(seconds=120)


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch, team_env: None) -> Iterator[FakeOpenAI]:
    """The OpenAI-compatible test model, where the agent's model activity builds its client."""
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-pydantic-ai")
        yield fake


@asynccontextmanager
async def support_worker(settings: Settings) -> AsyncIterator[tuple[Client, str]]:
    """The team's client (pydantic-ai's plugin) and a worker of the example's agent workflow
    with plangate's plugin, on a queue of its own."""
    await team.ensure_schema()
    team_client = await Client.connect(settings.temporal.address,
                                       namespace=settings.temporal.namespace,
                                       plugins=[PydanticAIPlugin()])
    queue = f"pydantic-ai-http-{uuid.uuid4().hex[:8]}"
    guard = PlangatePlugin(EXAMPLE / "guards.yaml", settings=settings, principal="support-agent")
    async with Worker(team_client, task_queue=queue, workflows=[PydanticAISupportWorkflow],
                      activities=[team.issue_credit, team.find_credit], plugins=[guard]):
        yield team_client, queue


async def credits_of(pg: psycopg.AsyncConnection[Any], account: str) -> list[tuple[Any, ...]]:
    cur = await pg.execute(
        "SELECT credit_id, amount_cents FROM team.credits WHERE account_id = %s", (account,))
    return list(await cur.fetchall())


def script(account: str) -> tuple[dict[str, Any], list[Any]]:
    chosen = {"account_id": account, "amount_cents": 1999, "reason": "damaged parcel"}
    return chosen, [Reply.calling("issue_credit", chosen), "Done: I said what the tool answered."]


@pytest.mark.asyncio(loop_scope="session")
async def test_a_pydantic_ai_credit_over_http_waits_for_a_card_and_credits_once(
    model: FakeOpenAI, settings: Settings, client: Client, pg: psycopg.AsyncConnection[Any],
) -> None:
    account = f"acct-{uuid.uuid4().hex[:8]}"
    chosen, replies = script(account)
    model.add(*replies)
    wf = f"pydantic-ai-http-{uuid.uuid4().hex[:8]}"
    async with support_worker(settings) as (team_client, queue):
        handle = await team_client.start_workflow(
            PydanticAISupportWorkflow.run, f"Credit {account} 19.99: damaged parcel.",
            id=wf, task_queue=queue, execution_timeout=RUN_TIMEOUT)
        api = Plangate(client, settings)
        card = await api.wait_for_card(wf, timeout=60)
        assert card.card.tool == "issue_credit" and card.card.args == chosen
        assert await credits_of(pg, account) == [] and await ledger_of(pg, wf) == []
        assert len(model.completions) == 1

        await api.approve(wf, card.step, card.digest)
        assert await handle.result() == "Done: I said what the tool answered."
        rows = await credits_of(pg, account)
        assert [amount for _, amount in rows] == [1999]
        assert await ledger_of(pg, wf) == [
            ("issue_credit", "money", "done", Decimal("19.99"), "support-agent")]
        assert (await scheduled(team_client, wf))["issue_credit"] == 1
    (said,) = tool_results(model.completions[1])
    assert rows[0][0] in said and "credited 1999 cents" in said, said


@pytest.mark.asyncio(loop_scope="session")
async def test_a_rejected_pydantic_ai_credit_is_not_made_and_the_model_reads_why(
    model: FakeOpenAI, settings: Settings, client: Client, pg: psycopg.AsyncConnection[Any],
) -> None:
    account = f"acct-{uuid.uuid4().hex[:8]}"
    _, replies = script(account)
    model.add(*replies)
    wf = f"pydantic-ai-rejected-{uuid.uuid4().hex[:8]}"
    async with support_worker(settings) as (team_client, queue):
        handle = await team_client.start_workflow(
            PydanticAISupportWorkflow.run, f"Credit {account} 19.99.", id=wf, task_queue=queue,
            execution_timeout=RUN_TIMEOUT)
        api = Plangate(client, settings)
        card = await api.wait_for_card(wf, timeout=60)
        await api.reject(wf, card.step, card.digest, reason="the parcel arrived intact")
        assert await handle.result() == "Done: I said what the tool answered."
        assert (await scheduled(team_client, wf))["issue_credit"] == 0
    assert await credits_of(pg, account) == [] and await ledger_of(pg, wf) == []
    (said,) = tool_results(model.completions[1])
    assert "plangate refused issue_credit: approval_rejected" in said, said
    assert "the parcel arrived intact" in said, said
