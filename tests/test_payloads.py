"""Payload discipline: a tool result is stored once (the activity's result, in the history); the
report carries it bounded with its size and SHA-256; run_sql returns a bounded number of rows and
says when it cut. Every payload of the run stays far below Temporal's 512 KiB warning."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from temporalio.api.enums.v1 import EventType

from plangate.activities.tool_activity import bounded
from plangate.testing import running_worker
from plangate.worker.compression import CompressionCodec

# The numbers of docs/tools.md, written here rather than imported: a wrong constant fails.
WARN = 512 * 1024  # Temporal's payload warning
ROWS_MAX, ROWS_BYTES_MAX = 1000, 128 * 1024  # run_sql: "at most 1,000 rows and 128 KiB of them"
RESULT_MAX = 256 * 1024  # "a result over 256 KiB is replaced there by its size, SHA-256 and ..."
PREVIEW = 16 * 1024  # "... a 16 KiB preview"


def wide_csv(lines: int) -> bytes:
    pad = "x" * 240
    rows = [f"R-{i:06d},{pad}" for i in range(lines)]
    return ("row_id,filler\n" + "\n".join(rows) + "\n").encode()


async def payload_sizes(client: Any, run_id: str, stored: bool = True) -> list[int]:
    """The size of every payload the run's history holds: as stored, or (``stored=False``) as
    the data it holds, decompressed."""
    sizes: list[int] = []
    async for e in client.get_workflow_handle(run_id).fetch_history_events():
        for attrs, field in (
            (e.activity_task_scheduled_event_attributes, "input"),
            (e.activity_task_completed_event_attributes, "result"),
            (e.workflow_execution_started_event_attributes, "input"),
            (e.workflow_execution_completed_event_attributes, "result"),
        ):
            payloads = list(getattr(attrs, field).payloads)
            if not stored:
                payloads = await CompressionCodec().decode(payloads)
            sizes += [len(p.data) for p in payloads]
    return sizes


async def tool_outputs(client: Any, run_id: str, tool: str) -> list[dict[str, Any]]:
    """The outputs of every completed call of ``tool``, read from the history."""
    types: dict[int, str] = {}
    out: list[dict[str, Any]] = []
    async for e in client.get_workflow_handle(run_id).fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            types[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            a = e.activity_task_completed_event_attributes
            if types[a.scheduled_event_id] == tool:
                (payload,) = await CompressionCodec().decode(list(a.result.payloads))
                out.append(json.loads(payload.data)["output"])
    return out


async def test_a_megabyte_of_rows_leaves_a_run_under_the_limits(client, settings, s3):
    tag = uuid.uuid4().hex[:8]
    bucket, target, dest = f"wide-drops-{tag}", f"staging.wide_{tag}", f"wide/{tag}.csv"
    s3.create_bucket(Bucket=bucket)
    body = wide_csv(4000)
    assert len(body) > 1_000_000
    s3.put_object(Bucket=bucket, Key="wide.csv", Body=body)
    plan = {"goal": "look at a wide table", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": bucket, "key": "wide.csv", "dest": dest}},
        {"n": 2, "tool": "warehouse.load", "depends_on": [1],
         "args": {"target": target, "source": dest}},
        {"n": 3, "tool": "warehouse.run_sql", "depends_on": [2],
         "args": {"statement": "sample_rows", "params": {"table": target, "limit": 4000}},
         "binds": {"first": "$.rows[0][0]"}},
    ]}
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    assert rep.status == "succeeded", rep.failure
    sample = rep.step(3)
    assert sample.binds == {"first": "R-000000"}
    digest = sample.result_digest
    assert digest is not None and digest.preview is not None and sample.result is None
    assert digest.preview.startswith('{"columns":["row_id","filler"],"rowcount":4000,')
    assert len(digest.preview.encode()) <= PREVIEW
    (output,) = await tool_outputs(client, rep.run_id, "warehouse.run_sql")
    assert output["truncated"] is True and output["rowcount"] == 4000
    # rows of equal size: as many as fit in 128 KiB (as JSON), the next one would not
    row_bytes = len(json.dumps(output["rows"][0]))
    assert len(output["rows"]) == ROWS_BYTES_MAX // row_bytes
    text = json.dumps(output, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert digest.size == len(text.encode()) <= ROWS_BYTES_MAX + 4096  # rows and an envelope
    assert digest.sha256 == hashlib.sha256(text.encode()).hexdigest()
    report = rep.model_dump_json().encode()
    assert len(report) < 64 * 1024
    sizes = await payload_sizes(client, rep.run_id)
    assert max(sizes) < WARN // 2, sorted(sizes)[-3:]
    # the result is stored once: only one payload of the history holds as much
    held = await payload_sizes(client, rep.run_id, stored=False)
    assert sum(1 for s in held if s >= digest.size) == 1


async def test_run_sql_returns_at_most_a_thousand_rows(client, settings, pg):
    table = f"public.narrow_{uuid.uuid4().hex[:8]}"
    await pg.execute(f"CREATE TABLE {table} AS SELECT g AS id FROM generate_series(1, 1500) g")
    plan = {"goal": "look at a long table", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "warehouse.run_sql",
         "args": {"statement": "sample_rows", "params": {"table": table, "limit": 1500}}},
    ]}
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    assert rep.status == "succeeded", rep.failure
    (output,) = await tool_outputs(client, rep.run_id, "warehouse.run_sql")
    assert output["truncated"] is True and output["rowcount"] == 1500
    assert output["rows"] == [[i] for i in range(1, ROWS_MAX + 1)]


def test_a_result_too_large_is_replaced_by_its_digest():
    # {"blob":"..."} is the blob and 11 bytes of JSON around it
    at_limit: dict[str, Any] = {"blob": "y" * (RESULT_MAX - 11)}
    assert bounded(at_limit) is at_limit  # 256 KiB exactly: kept whole
    big: dict[str, Any] = {"blob": "y" * (RESULT_MAX - 10)}
    out = bounded(big)
    data = json.dumps(big, sort_keys=True, separators=(",", ":")).encode()
    assert out["result_cut"] is True and out["size"] == len(data) == RESULT_MAX + 1
    assert out["sha256"] == hashlib.sha256(data).hexdigest()
    assert out["preview"] == data[:PREVIEW].decode()
    small: dict[str, Any] = {"rows": 3}
    assert bounded(small) is small
