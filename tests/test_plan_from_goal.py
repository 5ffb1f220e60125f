"""From a goal to a first plan: `plangate plan` asks the model (the local OpenAI-compatible test
server), checks and lints the answer, writes it for a person to read, and runs nothing. What it
writes, `plangate check` accepts and `plangate run` completes."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from plangate.cli import main
from plangate.testing import FakeOpenAI, running_worker, scheduled


def load_plan(bucket: str, key: str, target: str) -> dict[str, Any]:
    return {"steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": bucket, "key": key, "dest": f"planned/{target}.csv"}},
        {"n": 2, "tool": "warehouse.load", "effect": "write", "depends_on": [1],
         "args": {"target": target, "source": f"planned/{target}.csv"},
         "post": [{"probe": "table_rowcount", "table": target, "min": 2}],
         "on_unmet": "halt"},
    ], "reason": "fetch the export, then load it"}


@pytest.fixture
def env(stack, monkeypatch):
    for k, v in stack.env().items():
        monkeypatch.setenv(k, v)
    return monkeypatch


def model_env(env: pytest.MonkeyPatch, fake: FakeOpenAI) -> None:
    env.setenv("OPENAI_BASE_URL", fake.base_url)
    env.setenv("OPENAI_API_KEY", "sk-test-planning")
    env.setenv("PLANGATE_MODEL", "fake-model")


async def test_a_planned_goal_is_checked_written_and_runs(client, settings, s3, pg, env, tmp_path,
                                                          capsys):
    bucket, tag = f"plan-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="march.csv", Body=b"id,amount\n1,10\n2,20\n3,30\n")
    target = f"staging.planned_{tag}"
    context = tmp_path / "notes.txt"
    context.write_text(f"the export is s3://{bucket}/march.csv; load it into {target}")
    out = tmp_path / "plan.yaml"
    with FakeOpenAI(responses=[json.dumps(load_plan(bucket, "march.csv", target))]) as fake:
        model_env(env, fake)
        code = await asyncio.to_thread(
            main, ["plan", "load March's vendor export", "--context", str(context), "-o", str(out)]
        )
        sent = fake.requests[0].messages
    assert code == 0, capsys.readouterr().err
    system, user = sent[0]["content"], json.loads(sent[1]["content"])
    assert '"name":"warehouse.load"' in system and '"name":"table_rowcount"' in system
    assert user == {"goal": "load March's vendor export", "context": context.read_text()}
    written = out.read_text()
    assert written.startswith("# plangate plan: model fake-model: 2 steps")
    assert await asyncio.to_thread(main, ["check", "--strict", str(out)]) == 0
    async with running_worker(client, settings) as h:
        env.setenv("PLANGATE_TASK_QUEUE", h.settings.temporal.task_queue)
        run_id = f"planned-{tag}"
        code = await asyncio.to_thread(main, ["run", str(out), "--id", run_id, "--wait"])
    assert code == 0
    assert (await scheduled(client, run_id))["warehouse.load"] == 1
    cur = await pg.execute(f"SELECT count(*) FROM {target}")  # the test's own literal name
    assert (await cur.fetchone())[0] == 3


async def test_a_model_answer_naming_an_unknown_tool_is_refused(env, tmp_path, capsys):
    answer = {"steps": [{"n": 1, "tool": "billing.refund_everything", "args": {}}]}
    out = tmp_path / "plan.yaml"
    with FakeOpenAI(responses=[json.dumps(answer)]) as fake:
        model_env(env, fake)
        code = await asyncio.to_thread(main, ["plan", "refund everyone", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "unknown tool 'billing.refund_everything'" in err and "Traceback" not in err
    assert not out.exists()


async def test_findings_are_written_with_the_plan(env, tmp_path):
    # a write with no post condition passes check, not check --strict: the reader is told
    answer = {"steps": [{"n": 1, "tool": "warehouse.run_sql", "effect": "write",
                         "args": {"statement": "analyze", "params": {"table": "staging.t"}}}]}
    out = tmp_path / "plan.yaml"
    with FakeOpenAI(responses=[json.dumps(answer)]) as fake:
        model_env(env, fake)
        assert await asyncio.to_thread(main, ["plan", "analyze", "-o", str(out)]) == 0
    head = out.read_text().splitlines()[:3]
    assert head[1] == "# 1 findings of `plangate check --strict`:"
    assert "no post condition" in head[2]
    assert await asyncio.to_thread(main, ["check", str(out)]) == 0
    assert await asyncio.to_thread(main, ["check", "--strict", str(out)]) == 2


async def test_planning_without_a_model_says_so(env, capsys):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        env.delenv(name, raising=False)
    assert await asyncio.to_thread(main, ["plan", "anything"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("plangate: planning needs a model: set OPENAI_BASE_URL")
    assert len(err.splitlines()) == 1
