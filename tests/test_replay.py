"""Every recorded history replays against the current workflow code: a change that would break
a running workflow fails here (add a `workflow.patched` branch instead)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from plangate.assembly import PlangatePlugin

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_histories_were_recorded():
    names = {p.stem for p in HISTORIES}
    assert {
        "saturday_succeeded",
        "saturday_export_deleted",
        "closeout_replanned",
        "closeout_replanned_replan1",
        # a post wait (300 s, a read a minute) that expired, recorded with the code from before
        # the "post-wait-reads-on-schedule" patch: 5 reads where the schedule has 6
        "wait_expired_before_schedule_patch",
    } <= names


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_replay(path: Path):
    record = json.loads(await asyncio.to_thread(path.read_text))
    history = WorkflowHistory.from_json(record["workflow_id"], record["history"])
    replayer = Replayer(workflows=[], plugins=[PlangatePlugin()])
    await replayer.replay_workflow(history)
