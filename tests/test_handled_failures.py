"""A tool failure handled as designed (a ``ToolError``) is logged by the worker in one line, its
code once, with no traceback; the failure in the history carries the code as its type and the
detail as its message. Only the unexpected (``internal``) keeps its traceback."""

from __future__ import annotations

import logging
import uuid

import pytest
from temporalio.api.enums.v1 import EventType as E

from plangate.testing import history_events, running_worker


async def test_a_handled_tool_failure_is_one_line_with_its_code_once(
    client, settings, pg, caplog: pytest.LogCaptureFixture
) -> None:
    target = f"staging.handled_{uuid.uuid4().hex[:8]}"
    plan = {
        "goal": "load a file that is not there",
        "budget": {"replans_max": 0},
        "steps": [{"n": 1, "tool": "warehouse.load", "effect": "write",
                   "args": {"target": target, "source": "handled/missing.csv"}}],
    }
    with caplog.at_level(logging.DEBUG):
        async with running_worker(client, settings) as h:
            rep = await h.run(plan)
    assert rep.failure is not None and rep.failure.code == "not_found"
    cur = await pg.execute("SELECT to_regclass(%s)", (target,))
    assert (await cur.fetchone())[0] is None  # nothing was loaded

    failed = [e.activity_task_failed_event_attributes.failure
              for e in await history_events(client, rep.run_id)
              if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    assert failed, "the tool's failure is in the history"
    for f in failed:
        assert f.application_failure_info.type == "not_found"
        assert f.message == "source file handled/missing.csv"  # the code is the type, not here

    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    mine = [r for r in said if rep.run_id in r.getMessage()]
    assert len(mine) == len(failed), [r.getMessage() for r in said]
    for r in mine:
        line = r.getMessage()
        assert "\n" not in line and r.exc_info is None
        assert line.count("not_found") == 1 and "source file handled/missing.csv" in line
    traced = [r for r in said if r.exc_info is not None]
    assert not traced, [r.getMessage() for r in traced]
