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
import uuid

import pytest

from plangate.testing import console_script, running_worker

PROCESSES = 32  # half succeed (exit 0), half fail (exit 1)
AT_ONCE = 4


def succeeding() -> dict[str, object]:
    return {"goal": "ask the warehouse", "steps": [
        {"n": 1, "tool": "warehouse.run_sql", "effect": "read",
         "args": {"statement": "select_one"}},
    ]}


def failing(bucket: str) -> dict[str, object]:
    # the object is not there: the pre check fails, no budget to re-plan, the run fails
    return {"goal": "fetch what is not there", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": bucket, "key": "never/put.csv", "dest": "exit/never.csv"}},
    ]}


@pytest.fixture(scope="module")
def bucket(s3):
    name = f"exit-code-drops-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    return name


async def test_every_process_exits_with_its_runs_code(client, settings, stack, bucket,
                                                      tmp_path):
    plans = {0: tmp_path / "ok.json", 1: tmp_path / "fails.json"}
    plans[0].write_text(json.dumps(succeeding()))
    plans[1].write_text(json.dumps(failing(bucket)))
    script = console_script("plangate")
    tag = uuid.uuid4().hex[:6]
    async with running_worker(client, settings) as h:
        env = {**os.environ, **stack.env(), "PLANGATE_TASK_QUEUE": h.settings.temporal.task_queue}
        gate = asyncio.Semaphore(AT_ONCE)

        async def one(i: int) -> tuple[int, int, int | None, str, str]:
            want = i % 2
            async with gate:
                proc = await asyncio.create_subprocess_exec(
                    script, "run", str(plans[want]), "--wait", "--id", f"exit-{tag}-{i}",
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
                )
                out, err = await proc.communicate()
            return i, want, proc.returncode, out.decode(errors="replace"), err.decode(
                errors="replace"
            )

        results = await asyncio.gather(*(one(i) for i in range(PROCESSES)))
    wrong = [(i, want, got, (out + err)[-600:]) for i, want, got, out, err in results
             if got != want or "Fatal Python error" in err]
    assert not wrong, f"{len(wrong)} of {PROCESSES} processes: {wrong}"
    # Each printed its run's summary before leaving (the output was flushed), and a 1 is the
    # failed run's, not an error's: no 'plangate: ...' error line, no traceback, and the run's
    # failure in the summary.
    for i, want, _, out, err in results:
        assert "Traceback" not in err, err
        assert not any(line.startswith("plangate:") for line in err.splitlines()), err
        # a line per change of the run (stdout is no terminal), then its summary
        lines = out.splitlines()
        if want == 0:
            assert f"run exit-{tag}-{i}: succeeded (plan version 1)" in lines, out
        else:
            assert f"run exit-{tag}-{i}: failed (plan version 1)" in lines, out
            assert "failure: step 1 s3.get precondition_unmet" in out, out
