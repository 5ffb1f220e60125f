"""Agents nobody here wrote, on `plangate mcp` (issue 35): an OpenAI Agents SDK agent (its
``MCPServerStdio``) and a pydantic-ai agent (its ``MCPToolset``, over streamable HTTP), each on
a model pointed at plangate's OpenAI-compatible test model, which refuses a request whose tool
names the real API would refuse (the catalogue's dotted names are). Each agent lists the tools
(its first request accepted), writes an S3 object through the guarded ``s3_put`` (the object is
there) and asks for a credit through ``billing_issue_credit``, which waits for a person: the
model's next request carries the pending run's id, the run awaits approval with no credit made,
and it is cancelled at the end (no run left behind).

The Agents SDK is driven through its chat-completions model (``OpenAIChatCompletionsModel``):
the test model speaks ``/v1/chat/completions`` only, and the Responses API would be a second
fake for the same proof."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import httpx2
import pytest
from openai import AsyncOpenAI, BadRequestError

from plangate.client.api import Plangate
from plangate.demo.schema import Account, seed_account
from plangate.mcp.guarded import RUN_PREFIX
from plangate.plans.model import Effect
from plangate.records.report import RunStatus
from plangate.testing import FakeOpenAI, Recorded, Reply, running_worker, scheduled
from plangate.world.settings import Settings
from tests.mcp_client import http_server, server_env

CREDIT, SERVED_CREDIT = "billing.issue_credit", "billing_issue_credit"
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
RUN_ID = re.compile(re.escape(RUN_PREFIX) + r"[A-Za-z0-9_.\-]+[A-Za-z0-9]")
TASK = "Write the status note, then credit the account 7.50 EUR."


def money_waits(settings: Settings) -> Settings:
    return replace(settings, policy=replace(settings.policy,
                                            approve_effects=(Effect.MONEY, Effect.EXTERNAL)))


def script(bucket: str, key: str, aid: str) -> list[Any]:
    return [
        Reply.calling("s3_put", {"bucket": bucket, "key": key, "body": "all systems normal"}),
        Reply.calling(SERVED_CREDIT, {"account_id": aid, "amount_eur": 7.5}),
        "The note is written; the credit waits for an approver.",
    ]


def tool_names(req: Recorded) -> list[str]:
    return [t["function"]["name"] for t in req.body["tools"]]


def tool_results(req: Recorded) -> list[str]:
    """The text of each tool result the request carries back to the model."""
    out = []
    for m in req.messages:
        if m.get("role") == "tool":
            content = m["content"]
            out.append(content if isinstance(content, str) else json.dumps(content))
    return out


async def the_dotted_names_are_refused(fake: FakeOpenAI, accepted: Recorded) -> None:
    """The agent's own accepted request, its tools under their catalogue names, refused."""
    tools = accepted.body["tools"]
    i = next(i for i, t in enumerate(tools) if t["function"]["name"] == "s3_put")
    dotted = json.loads(json.dumps(accepted.body))
    dotted["tools"][i]["function"]["name"] = "s3.put"
    async with httpx2.AsyncClient() as http:
        answer = await http.post(f"{fake.base_url}/chat/completions", json=dotted)
    assert answer.status_code == 400
    assert answer.json()["error"] == {
        "message": f"Invalid 'tools[{i}].function.name': string does not match pattern. "
                   "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$', got 's3.put'.",
        "type": "invalid_request_error", "param": f"tools[{i}].function.name",
        "code": "invalid_value"}
    # the same through the OpenAI client, as an agent's model would meet it
    openai = AsyncOpenAI(base_url=fake.base_url, api_key="sk-test", max_retries=0)
    with pytest.raises(BadRequestError) as refused:
        await openai.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {
                "name": "billing.issue_credit", "parameters": {"type": "object"}}}])
    assert refused.value.status_code == 400
    assert "Invalid 'tools[0].function.name': string does not match pattern" in \
        refused.value.message


async def the_agent_ran(
    client: Any, h: Any, pg: Any, s3: Any, fake: FakeOpenAI, bucket: str, key: str, aid: str,
) -> None:
    """What the agent's run left in the world and told its model."""
    assert fake.remaining == 0  # every scripted answer taken: no request was refused
    first, after_put, after_credit = fake.completions
    names = tool_names(first)
    assert all(OPENAI_NAME.match(n) for n in names), names
    assert {"s3_put", SERVED_CREDIT, "check_plan", "run_plan"} <= set(names)
    await the_dotted_names_are_refused(fake, first)

    # the guarded write: its object, written by the catalogue tool
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"all systems normal"
    (put_said,) = tool_results(after_put)
    assert "succeeded" in put_said, put_said

    # the money call: its pending run's id reached the model, the run waits, nothing credited
    said = tool_results(after_credit)
    assert len(said) == 2 and said[0] == put_said
    run_ids = set(RUN_ID.findall(said[1]))
    assert len(run_ids) == 1, said[1]
    (run_id,) = run_ids
    assert run_id.startswith(f"{RUN_PREFIX}{CREDIT}")
    api = Plangate(client, h.settings)
    rep = await api.report(run_id)
    assert rep.status is RunStatus.AWAITING_APPROVAL
    (card,) = rep.approvals
    assert card.status.value == "pending" and card.card.tool == CREDIT
    assert card.digest in said[1]  # the approve line a person runs
    cur = await pg.execute("SELECT count(*) FROM demo.credits WHERE account_id = %s", (aid,))
    assert (await cur.fetchone())[0] == 0
    assert (await scheduled(client, run_id)).get(CREDIT, 0) == 0
    await api.cancel(run_id, reason="test over", requester="test_mcp_agents")
    assert (await api.result(run_id)).status is RunStatus.CANCELLED


async def agent_run(
    client: Any, settings: Settings, stack: Any, pg: Any, s3: Any, world: Any,
    drive: Callable[[dict[str, str], FakeOpenAI], Awaitable[str]],
) -> None:
    bucket, key = f"agents-{uuid.uuid4().hex[:8]}", f"status-{uuid.uuid4().hex[:8]}.txt"
    s3.create_bucket(Bucket=bucket)
    aid = f"acct_{uuid.uuid4().hex[:8]}"
    await seed_account(world, Account(aid, f"ar@{aid}.example", status="closed"))
    async with running_worker(client, money_waits(settings)) as h:
        env = server_env(stack, settings, h.settings.temporal.task_queue)
        with FakeOpenAI(script(bucket, key, aid)) as fake:
            final = await drive(env, fake)
            assert final == "The note is written; the credit waits for an approver."
            await the_agent_ran(client, h, pg, s3, fake, bucket, key, aid)


async def test_an_openai_agents_sdk_agent_over_stdio(client, settings, stack, pg, s3, world):
    import sys

    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
    from agents.mcp import MCPServerStdio

    async def drive(env: dict[str, str], fake: FakeOpenAI) -> str:
        openai = AsyncOpenAI(base_url=fake.base_url, api_key="sk-test", max_retries=0)
        params = {"command": sys.executable, "args": ["-m", "plangate", "mcp"], "env": env}
        async with MCPServerStdio(params=params, name="plangate",  # type: ignore[arg-type]
                                  client_session_timeout_seconds=60) as server:
            agent = Agent(name="ops", instructions="Use the plangate tools.",
                          mcp_servers=[server],
                          model=OpenAIChatCompletionsModel("fake-model", openai_client=openai))
            result = await Runner.run(agent, TASK, run_config=RunConfig(tracing_disabled=True))
        return str(result.final_output)

    await agent_run(client, settings, stack, pg, s3, world, drive)


async def test_a_pydantic_ai_agent_over_http(client, settings, stack, pg, s3, world):
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    async def drive(env: dict[str, str], fake: FakeOpenAI) -> str:
        async with http_server(env) as srv:
            toolset: MCPToolset[None] = MCPToolset(
                srv.url, headers={"Authorization": f"Bearer {srv.token}"}, read_timeout=60)
            model = OpenAIChatModel("fake-model", provider=OpenAIProvider(
                base_url=fake.base_url, api_key="sk-test"))
            agent = Agent(model, toolsets=[toolset], instructions="Use the plangate tools.")
            async with agent:
                result = await agent.run(TASK)
        return result.output

    await agent_run(client, settings, stack, pg, s3, world, drive)
