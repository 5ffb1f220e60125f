"""``examples/agent_handover.py``: an agent on the ``openai`` client whose tool call hands its
plan to plangate and gets the run report back as the tool's result. The model is the local
OpenAI-compatible fake (scripted: a ``run_plan`` call, then a final answer); the plan runs on a
real worker against the real stack."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from agent_handover import hand_over
from openai import AsyncOpenAI

from plangate import Plangate
from plangate.testing import FakeOpenAI, Reply, Script, running_worker, scheduled


def text_of(path: str) -> str:
    return Path(path).read_text()


def publish_plan(bucket: str, key: str) -> dict[str, Any]:
    return {"goal": "publish the release note", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "args": {"bucket": bucket, "key": key, "body": "v1.4 is out"}},
        {"n": 2, "tool": "s3.get", "effect": "read", "depends_on": [1],
         "args": {"bucket": bucket, "key": key, "dest": f"agent/{key}"},
         "binds": {"etag": "$.etag"}},
    ]}


async def test_the_agent_hands_its_plan_over_and_reads_the_report(client, settings, s3):
    bucket, key = f"agent-{uuid.uuid4().hex[:8]}", "notes/release.txt"
    s3.create_bucket(Bucket=bucket)
    script: list[Script] = [
        Reply.calling("run_plan", publish_plan(bucket, key)), "The note is published."
    ]
    with FakeOpenAI(responses=script) as fake:
        async with (
            AsyncOpenAI(base_url=fake.base_url, api_key="sk-test", max_retries=0) as llm,
            running_worker(client, settings) as h,
        ):
            pg = Plangate(client, h.settings)
            done = await hand_over("publish the release note", llm, pg, model="fake-model")
            (run_id,) = done.runs
            final = await pg.result(run_id)
        first, second = fake.completions
    assert done.answer == "The note is published."
    assert [t["function"]["name"] for t in first.body["tools"]] == ["run_plan"]
    # the plan ran, once: from the history and in the world
    calls = await scheduled(client, run_id)
    assert (calls["s3.put"], calls["s3.get"]) == (1, 1)
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"v1.4 is out"
    (got,) = [s for s in final.steps if s.tool == "s3.get"]
    assert got.result is not None and str(got.result["dest"]).endswith(f"/agent/{key}")
    assert text_of(str(got.result["dest"])) == "v1.4 is out"  # in the run's own directory
    # the second request carried the run report as the result of the model's tool call
    asked, answered = second.messages[-2:]
    (call,) = asked["tool_calls"]
    assert (call["function"]["name"], answered["role"]) == ("run_plan", "tool")
    assert answered["tool_call_id"] == call["id"]
    report = json.loads(answered["content"])
    assert report == json.loads(final.model_dump_json())
    assert report["run_id"] == run_id and report["status"] == "succeeded"
    assert [s["state"] for s in report["steps"]] == ["DONE", "DONE"]


async def test_a_refused_plan_goes_back_to_the_model_with_the_reasons(client, settings):
    plan = {"goal": "clean up", "steps": [{"n": 1, "tool": "shell.exec", "args": {"cmd": "rm"}}]}
    script: list[Script] = [Reply.calling("run_plan", plan), "I cannot do that with these tools."]
    with FakeOpenAI(responses=script) as fake:
        async with AsyncOpenAI(base_url=fake.base_url, api_key="sk-test", max_retries=0) as llm:
            done = await hand_over("clean up", llm, Plangate(client, settings), model="fake-model")
        _, second = fake.completions
    assert done.runs == []  # nothing started
    refused = json.loads(second.messages[-1]["content"])["refused"]
    assert refused == ["step 1, field tool: unknown tool 'shell.exec'"]
    assert done.answer == "I cannot do that with these tools."
