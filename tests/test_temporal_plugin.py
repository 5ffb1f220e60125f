"""plangate.temporal on a team's own worker: the example project (examples/temporal_team), its
activities unchanged, guarded by adding the plugin and its guard table. Real Temporal, Postgres
and S3; what is asserted is in the world (rows, objects) and in the workflow's history."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker

from plangate.client.api import Plangate
from plangate.temporal import PlangatePlugin
from plangate.testing import scheduled
from plangate.world.settings import Settings

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "temporal_team"
sys.path.insert(0, str(EXAMPLE))

from credits import activities as team  # noqa: E402
from credits.workflows import ArchiveWorkflow, CountWorkflow, CreditWorkflow  # noqa: E402

ACTIVITIES: list[Callable[..., Any]] = [
    team.issue_credit, team.find_credit, team.load_export, team.archive_object, team.count_rows]
WORKFLOWS = [ArchiveWorkflow, CreditWorkflow, CountWorkflow]


@pytest.fixture
def team_env(stack: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    env = stack.env()
    monkeypatch.setenv("TEAM_DATABASE_URL", env["PLANGATE_DATABASE_URL"])
    monkeypatch.setenv("TEAM_S3_ENDPOINT_URL", env["PLANGATE_S3_ENDPOINT_URL"])
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.setenv(k, env[k])


@pytest_asyncio.fixture(loop_scope="session")
async def team_client(settings: Settings, team_env: None) -> Client:
    """The team's own client: its address, its converter (pydantic), plangate's plugin."""
    await team.ensure_schema()
    return await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace,
                                data_converter=pydantic_data_converter)


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"team-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


def plugin(settings: Settings, **kw: Any) -> PlangatePlugin:
    return PlangatePlugin(EXAMPLE / "guards.yaml", settings=settings, principal="support-agent",
                          **kw)


async def _worker(client: Client, settings: Settings, queue: str, **kw: Any) -> Worker:
    return Worker(client, task_queue=queue, workflows=WORKFLOWS, activities=ACTIVITIES,
                  plugins=[plugin(settings, **kw)])


@pytest_asyncio.fixture(loop_scope="session")
async def team_worker(team_client: Client, settings: Settings) -> AsyncIterator[str]:
    queue = f"team-{uuid.uuid4().hex[:8]}"
    async with await _worker(team_client, settings, queue):
        yield queue


async def credits_of(pg: psycopg.AsyncConnection[Any], account: str) -> int:
    cur = await pg.execute("SELECT count(*) FROM team.credits WHERE account_id = %s", (account,))
    row = await cur.fetchone()
    return int(row[0]) if row else 0


@pytest.mark.asyncio(loop_scope="session")
async def test_unmet_pre_condition_the_activity_never_runs(
    team_client: Client, team_worker: str, bucket: str, s3: Any
) -> None:
    wf = f"archive-{uuid.uuid4().hex[:8]}"
    before = team.CALLS["archive_object"]
    with pytest.raises(WorkflowFailureError) as caught:
        await team_client.execute_workflow(
            ArchiveWorkflow.run, args=[bucket, "missing.csv"], id=wf, task_queue=team_worker,
            execution_timeout=timedelta(seconds=60))
    err = caught.value.cause
    assert isinstance(err, ActivityError)
    cause = err.cause
    assert isinstance(cause, ApplicationError) and cause.type == "precondition_failed"
    assert "object_exists" in cause.message and "violated" in cause.message
    assert team.CALLS["archive_object"] == before
    ran = await scheduled(team_client, wf)
    assert ran["archive_object"] == 0 and ran["plangate.guard.check"] == 1
    keys = s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0)
    assert keys == 0

    # the object there: the same workflow archives it
    s3.put_object(Bucket=bucket, Key="there.csv", Body=b"a,b\n")
    done = await team_client.execute_workflow(
        ArchiveWorkflow.run, args=[bucket, "there.csv"], id=f"{wf}-2", task_queue=team_worker,
        execution_timeout=timedelta(seconds=60))
    assert done == "archive/there.csv"
    assert s3.get_object(Bucket=bucket, Key="archive/there.csv")["Body"].read() == b"a,b\n"


@pytest.mark.asyncio(loop_scope="session")
async def test_a_money_call_waits_for_a_card_and_credits_once(
    team_client: Client, team_worker: str, client: Client, settings: Settings,
    pg: psycopg.AsyncConnection[Any],
) -> None:
    account = f"acct-{uuid.uuid4().hex[:8]}"
    wf = f"credit-{uuid.uuid4().hex[:8]}"
    handle = await team_client.start_workflow(
        CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=2500),
        id=wf, task_queue=team_worker, execution_timeout=timedelta(seconds=120))
    api = Plangate(client, settings)
    card = await api.wait_for_card(wf, timeout=60)
    assert card.card.tool == "issue_credit"
    assert card.card.args == {"account_id": account, "amount_cents": 2500, "reason": ""}
    assert await credits_of(pg, account) == 0
    await api.approve(wf, card.step, card.digest)
    result = await handle.result()
    assert result.account_id == account and result.amount_cents == 2500
    assert await credits_of(pg, account) == 1
    rep = await api.report(wf)
    assert rep.steps[0].tool == "issue_credit" and rep.steps[0].state.value == "DONE"
    assert [c.phase.value for c in rep.steps[0].checks] == ["post"]


@pytest.mark.asyncio(loop_scope="session")
async def test_without_the_workflow_guard_the_call_is_refused_at_the_call(
    team_client: Client, settings: Settings, pg: psycopg.AsyncConnection[Any],
) -> None:
    queue = f"team-bare-{uuid.uuid4().hex[:8]}"
    account = f"acct-{uuid.uuid4().hex[:8]}"
    before = team.CALLS["issue_credit"]
    async with await _worker(team_client, settings, queue, workflow_guard=False):
        with pytest.raises(WorkflowFailureError) as caught:
            await team_client.execute_workflow(
                CreditWorkflow.run, team.CreditRequest(account_id=account, amount_cents=100),
                id=f"bare-{uuid.uuid4().hex[:8]}", task_queue=queue,
                execution_timeout=timedelta(seconds=60))
    cause = caught.value.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError)
    assert cause.cause.type == "not_permitted"
    assert cause.cause.details and cause.cause.details[0]["status"] == 403
    assert team.CALLS["issue_credit"] == before
    assert await credits_of(pg, account) == 0


@pytest.mark.asyncio(loop_scope="session")
async def test_the_team_keeps_its_converter_and_unguarded_activities_pass(
    team_client: Client, team_worker: str,
) -> None:
    guarded = await Client.connect(
        team_client.service_client.config.target_host, namespace=team_client.namespace,
        data_converter=pydantic_data_converter, plugins=[PlangatePlugin({})])
    assert guarded.data_converter is pydantic_data_converter
    wf = f"count-{uuid.uuid4().hex[:8]}"
    assert await team_client.execute_workflow(
        CountWorkflow.run, 7, id=wf, task_queue=team_worker,
        execution_timeout=timedelta(seconds=60)) == 7
    ran = await scheduled(team_client, wf)
    assert ran == {"count_rows": 1}
