"""The Python API's own examples run as written (issue 22): every ``python`` block of
docs/python-api.md and the example in ``plangate.client.api``'s docstring, with top-level
``await``, against the test stack and a worker, in a directory holding the ``plan.json`` they
name (its step 1 waits for approval) and with a model for ``plan``."""

from __future__ import annotations

import ast
import contextlib
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

import plangate.client.api
from plangate.testing import FakeOpenAI, running_worker

DOCS = Path(__file__).resolve().parent.parent / "docs" / "python-api.md"


def doc_snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.DOTALL)


def docstring_example() -> str:
    doc = plangate.client.api.__doc__ or ""
    block = doc.split("::\n\n", 1)[1]
    lines = block.splitlines()
    return "\n".join(line.removeprefix("    ") for line in lines) + "\n"


async def run_as_written(source: str) -> None:
    code = compile(source, "<example>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, {"__name__": "__example__"})  # the repository's own text
    if result is not None:
        await result


@pytest.mark.parametrize("where", ["docs/python-api.md", "plangate.client.api"])
async def test_the_api_examples_run_as_written(where: str, client: Any, settings: Any,
                                               stack: Any, s3: Any, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    sources = doc_snippets() if where.endswith(".md") else [docstring_example()]
    assert sources and all("await" in s for s in sources)
    bucket = f"examples-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    plan = {"goal": "publish the report", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "approval": "required",
         "args": {"bucket": bucket, "key": "report.txt", "body": "final figures"}}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    monkeypatch.chdir(tmp_path)
    answer = {"steps": [{"n": 1, "tool": "warehouse.run_sql", "effect": "read",
                         "args": {"statement": "select_one"}}], "reason": "a look"}
    async with running_worker(client, settings) as h:
        for k, v in {**stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue,
                     "PLANGATE_WORKDIR": str(settings.world.workdir)}.items():
            monkeypatch.setenv(k, v)
        with FakeOpenAI(responses=[json.dumps(answer)] * 4) as fake:
            monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test-examples")
            monkeypatch.setenv("PLANGATE_MODEL", "fake-model")
            for source in sources:
                with contextlib.chdir(tmp_path):
                    await run_as_written(source)
    assert s3.get_object(Bucket=bucket, Key="report.txt")["Body"].read() == b"final figures"
