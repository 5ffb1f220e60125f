"""Testing with plangate against real services, as ``temporalio.testing`` is for Temporal: the
embedded stack (real Temporal dev server, Postgres and S3 on free ports), the real worker on a
task queue of its own, plans run to their end, what their histories hold, and an
OpenAI-compatible test model. Nothing here is mocked, and nothing needs pytest: these are plain
context managers and functions, which a team wraps in fixtures of its own.

A team's test of its own tool (``team_tools.py`` declares ``team.save``, a write of an S3 object
with a post-condition), the way plangate's own tests are written (``tests/test_import_root.py``
runs this very project)::

    # tests/conftest.py
    import pytest_asyncio
    from plangate.testing import embedded_stack

    @pytest_asyncio.fixture(scope="session", loop_scope="session")
    async def stack():
        async with embedded_stack() as stack:
            yield stack

    # tests/test_team_tools.py
    from plangate import Settings
    from plangate.client.connection import connect
    from plangate.testing import running_worker, s3_client, scheduled

    async def test_a_saved_note_is_an_object(stack):
        settings = Settings.from_env({**stack.env(), "PLANGATE_EXTENSIONS": "team_tools"})
        s3 = s3_client(stack.env())
        s3.create_bucket(Bucket="notes")
        async with running_worker(await connect(settings), settings) as runs:
            report = await runs.run({"goal": "save a note", "steps": [
                {"n": 1, "tool": "team.save",
                 "args": {"bucket": "notes", "key": "n1", "text": "hi"}}]})
            calls = await scheduled(runs.client, report.run_id)
        body = s3.get_object(Bucket="notes", Key="n1")["Body"].read()
        assert body == b"hi" and calls["team.save"] == 1

- the stack: :func:`embedded_stack`, :func:`stack_state`, :func:`approver_env` (approvers'
  keys in the environment, for runs whose cards a test answers), :func:`s3_client`,
  :func:`time_skipping` (Temporal's time-skipping server), :func:`console_script`;
- runs: :func:`running_worker` (yields a :class:`Harness`: ``run``, ``start``,
  ``run_approving``), :func:`until_state`; the history: :func:`chain`, :func:`history_events`,
  :func:`scheduled`, :func:`attempts`, :func:`local_activity`; a worker's metrics:
  :func:`scrape` (:class:`Scrape`);
- the model: :class:`FakeOpenAI` (scripted :class:`Reply` answers, :class:`Recorded`
  requests), :func:`model_backed` (the real re-planner activity against it).

``import plangate`` never imports this module.
"""

from __future__ import annotations

from plangate.testing._model import FakeOpenAI, Recorded, Reply, Script, model_backed
from plangate.testing._runs import (
    Harness,
    Scrape,
    attempts,
    chain,
    ended,
    history_events,
    local_activity,
    payload_json,
    running_worker,
    scheduled,
    scrape,
    until_state,
)
from plangate.testing._stack import (
    approver_env,
    console_script,
    embedded_stack,
    s3_client,
    stack_state,
    time_skipping,
)

__all__ = [
    "FakeOpenAI", "Harness", "Recorded", "Reply", "Scrape", "Script", "approver_env", "attempts",
    "chain", "console_script", "embedded_stack", "ended", "history_events", "local_activity",
    "model_backed", "payload_json", "running_worker", "s3_client", "scheduled", "scrape",
    "stack_state", "time_skipping", "until_state",
]
