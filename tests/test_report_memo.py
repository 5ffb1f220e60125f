"""``plangate report`` reads each finished run's calls' windows from the memo the run wrote as
it ended (``records.windows``), in the listing, instead of fetching every run's result; a run
whose memo is missing, or not its own, is fetched as before."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from plangate.client.reporting import _windows, finished_runs, pages, query
from plangate.client.staleness import Finished
from plangate.records.windows import WINDOWS_MEMO, RunWindows, executions, own
from plangate.testing import running_worker


def plan(bucket: str, key: str) -> dict[str, Any]:
    return {"goal": "write, then read", "steps": [
        {"n": 1, "tool": "s3.put", "args": {"bucket": bucket, "key": key, "body": "x"}},
        {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
         "args": {"statement": "select_one"}},
    ]}


async def test_the_report_reads_the_windows_each_run_wrote(client, settings, s3):
    bucket = f"win-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    since = datetime.now(UTC) - timedelta(seconds=1)
    async with running_worker(client, settings) as h:
        reports = [await h.run(plan(bucket, f"{i}.txt")) for i in range(3)]
        queue = h.settings.temporal.task_queue
        listed = [e async for e in client.list_workflows(query(since, queue))]
        found = await finished_runs(client, since, queue)
        # a page a run, each next one asked for before the last is read: the same runs, once
        paged = await finished_runs(client, since, queue, page_size=1)
        sizes = [len(p) async for p in pages(client, query(since, queue), 1)]
        assert [n for n in sizes if n] == [1, 1, 1]  # (the server may end on an empty page)
    assert len(found) == 3
    assert sorted(f.run_id for f in paged) == sorted(f.run_id for f in found)
    assert sorted(paged, key=lambda f: f.run_id) == sorted(found, key=lambda f: f.run_id)
    assert {r.status for r in reports} == {"succeeded"}
    assert {e.id for e in listed} == {r.run_id for r in reports}
    for e in listed:
        rep = next(r for r in reports if r.run_id == e.id)
        memo = await _windows(client, e.raw_info)  # what the report takes: the execution's own memo
        assert memo is not None and memo.execution == e.run_id
        assert memo.calls == executions(rep, rep.submitted_at or e.start_time,
                                        rep.begun_at or e.start_time)
        assert [c.tool for c in memo.calls] == ["s3.put", "warehouse.run_sql"]
        # the same as from the fetched report
        of = Finished.of(rep, rep.submitted_at or e.start_time, rep.begun_at or e.start_time)
        assert next(f for f in found if f.run_id == e.id) == of
        # a memo naming another execution is not taken (a starter could set one)
        raw = await e.memo_value(WINDOWS_MEMO, type_hint=RunWindows)
        assert raw == memo
    # a memo naming another execution, or another run, is not taken (a starter can set one)
    e, memo = listed[0], await _windows(client, listed[0].raw_info)
    assert memo is not None and own(memo, e.id, e.run_id) == memo
    assert own(memo.model_copy(update={"execution": "another"}), e.id, e.run_id) is None
    assert own(memo, "another-run", e.run_id) is None
