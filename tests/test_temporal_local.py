"""A guarded activity scheduled as a local activity does not pass its guard: the workflow
interceptor wraps only ``execute_activity``, so such a call carries no guard header and the
activity interceptor refuses it at the call (403 ``not_permitted``), as it refuses a call from a
workflow without the plugin. Real Temporal and Postgres; the example project's activities."""

from __future__ import annotations

import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from plangate.temporal import PlangatePlugin
from plangate.world.settings import Settings

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "temporal_team"
sys.path.insert(0, str(EXAMPLE))

from credits import activities as team  # noqa: E402


@workflow.defn(name="LocalCredit")
class LocalCredit:
    """The team's credit, scheduled as a local activity (the workflow interceptor never sees
    it)."""

    @workflow.run
    async def run(self, req: team.CreditRequest) -> team.Credit:
        return await workflow.execute_local_activity(
            team.issue_credit, req, start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=3))


@pytest_asyncio.fixture(loop_scope="session")
async def team_client(stack: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Client:
    env = stack.env()
    monkeypatch.setenv("TEAM_DATABASE_URL", env["PLANGATE_DATABASE_URL"])
    monkeypatch.setenv("TEAM_S3_ENDPOINT_URL", env["PLANGATE_S3_ENDPOINT_URL"])
    await team.ensure_schema()
    return await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace,
                                data_converter=pydantic_data_converter)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_guarded_activity_run_as_a_local_activity_is_refused_at_the_call(
    team_client: Client, settings: Settings, pg: psycopg.AsyncConnection[Any],
) -> None:
    queue = f"team-local-{uuid.uuid4().hex[:8]}"
    account = f"acct-{uuid.uuid4().hex[:8]}"
    before = team.CALLS["issue_credit"]
    plugin = PlangatePlugin(EXAMPLE / "guards.yaml", settings=settings, principal="support-agent")
    async with Worker(team_client, task_queue=queue, workflows=[LocalCredit],
                      activities=[team.issue_credit, team.find_credit], plugins=[plugin],
                      workflow_runner=UnsandboxedWorkflowRunner()):
        with pytest.raises(WorkflowFailureError) as caught:
            await team_client.execute_workflow(
                LocalCredit.run, team.CreditRequest(account_id=account, amount_cents=100),
                id=f"local-{uuid.uuid4().hex[:8]}", task_queue=queue,
                execution_timeout=timedelta(seconds=60))
    cause = caught.value.cause  # a local activity's failure reaches the client as its own
    refused = cause.cause if isinstance(cause, ActivityError) else cause
    assert isinstance(refused, ApplicationError)
    assert refused.type == "not_permitted" and refused.non_retryable
    assert "local activity" in refused.message
    assert team.CALLS["issue_credit"] == before
    cur = await pg.execute("SELECT count(*) FROM team.credits WHERE account_id = %s", (account,))
    row = await cur.fetchone()
    assert row is not None and row[0] == 0
