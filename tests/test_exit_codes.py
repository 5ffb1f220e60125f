"""Short-lived `plangate run --wait` processes exit with their run's exit code, every time.

A finished command used to die now and then at interpreter exit with ``Fatal Python error:
PyGILState_Release`` (exit 134; once SIGSEGV): the Temporal client's native runtime threads
during interpreter teardown (temporalio/sdk-python issue 300). The console script now leaves
with ``os._exit`` once the work is done and the output flushed. Real subprocesses of the
installed script, against a real worker, Temporal, Postgres and S3.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from tests.harness import running_worker

PROCESSES = 32  # half succeed (exit 0), half fail (exit 1)
AT_ONCE = 4
BUCKET = "exit-code-drops"


def console_script(name: str) -> str:
    script = Path(sys.executable).parent / name
    if not script.is_file():
        raise RuntimeError(f"{name} is not installed next to {sys.executable}")
    return str(script)


def succeeding() -> dict[str, object]:
    return {"goal": "ask the warehouse", "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "effect": "read",
         "args": {"statement": "select_one"}},
    ]}


def failing() -> dict[str, object]:
    # the object is not there: the pre check fails, no budget to re-plan, the run fails
    return {"goal": "fetch what is not there", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": BUCKET, "key": "never/put.csv", "dest": "exit/never.csv"}},
    ]}


@pytest.fixture(scope="module")
def bucket(s3):
    s3.create_bucket(Bucket=BUCKET)
    return BUCKET


async def test_every_process_exits_with_its_runs_code(client, settings, stack, bucket,
                                                      tmp_path):
    plans = {0: tmp_path / "ok.json", 1: tmp_path / "fails.json"}
    plans[0].write_text(json.dumps(succeeding()))
    plans[1].write_text(json.dumps(failing()))
    script = console_script("plangate")
    tag = uuid.uuid4().hex[:6]
    async with running_worker(client, settings) as h:
        env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": h.settings.task_queue}
        gate = asyncio.Semaphore(AT_ONCE)

        async def one(i: int) -> tuple[int, int, int | None, str]:
            want = i % 2
            async with gate:
                proc = await asyncio.create_subprocess_exec(
                    script, "run", str(plans[want]), "--wait", "--id", f"exit-{tag}-{i}",
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
                )
                out, err = await proc.communicate()
            return i, want, proc.returncode, (out + err).decode(errors="replace")

        results = await asyncio.gather(*(one(i) for i in range(PROCESSES)))
    wrong = [(i, want, got, text[-600:]) for i, want, got, text in results
             if got != want or "Fatal Python error" in text]
    assert not wrong, f"{len(wrong)} of {PROCESSES} processes: {wrong}"
    # each printed its run's summary before leaving: the output was flushed
    for i, want, _, text in results:
        assert f"exit-{tag}-{i}: {'succeeded' if want == 0 else 'failed'}" in text, text
