"""The worker's Prometheus endpoint (``PLANGATE_METRICS_ADDRESS``): Temporal's own metrics and
plangate's, scraped after real runs on the session's Temporal, Postgres and S3.

A worker on a runtime of its own, serving a free port, runs five plans: a card approved, a step
skipped as done, a write refused with 412 (a stale If-Match), a pre condition violated, and a
card left waiting, then cancelled. The scrape says exactly what their reports say; replaying
their histories on the same runtime adds nothing.
"""

from __future__ import annotations

import socket
import uuid
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from temporalio.worker import Replayer

from plangate.cli import main
from plangate.client.api import Plangate
from plangate.client.connection import connect
from plangate.dev._stack import free_port
from plangate.records.report import RunReport
from plangate.testing import Scrape, running_worker, scrape
from plangate.worker import metrics
from plangate.worker.assembly import PlangateWorkerPlugin
from plangate.world.settings import Settings
from tests.test_approvals import card_of

STALE = '"0123456789abcdef0123456789abcdef"'


def put(bucket: str, key: str, body: str, **step: Any) -> dict[str, Any]:
    args = {"bucket": bucket, "key": key, "body": body, **step.pop("args", {})}
    return {"goal": f"put {key}", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "args": args, **step},
    ]}


def probes_read(reports: list[RunReport]) -> Counter[tuple[str, str]]:
    """(probe, outcome) of every condition the reports say was read."""
    return Counter(
        (r.condition.probe, str(r.outcome))
        for rep in reports for s in rep.steps for c in s.checks for r in c.results
    )


def by(
    scraped: Scrape, name: str, keys: tuple[str, ...], **only: str
) -> dict[tuple[str, ...], float]:
    """``name``'s samples with the labels ``only``, by the values of ``keys``."""
    out: dict[tuple[str, ...], float] = {}
    for n, labels, value in scraped.samples(name):
        if n == name and all(labels.get(k) == v for k, v in only.items()):
            key = tuple(labels[k] for k in keys)  # summed over the labels not asked for
            out[key] = out.get(key, 0.0) + value
    return out


async def test_a_scrape_after_runs_counts_what_their_reports_say(client, settings, s3):
    address = f"127.0.0.1:{free_port()}"
    serving = replace(settings.observability, metrics_address=address)
    worker_client = await connect(replace(settings, observability=serving), serve_metrics=True)
    bucket = f"metrics-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="same.txt", Body=b"same")
    s3.put_object(Bucket=bucket, Key="moved.txt", Body=b"v1")
    async with running_worker(worker_client, settings) as h:
        queue = h.queue  # the worker's, its catalogue's
        api = Plangate(client, h.settings)
        approved_id = await api.start(put(bucket, "approved.txt", "x", approval="required"))
        await api.approve(approved_id, 1, (await card_of(api, approved_id)).digest, by="erin")
        approved = await api.result(approved_id)
        skipped = await h.run(put(bucket, "same.txt", "same"))
        refused = await h.run(put(bucket, "moved.txt", "v2", args={"if_match": STALE}))
        violated = await h.run({"goal": "read", "budget": {"replans_max": 0}, "steps": [
            {"n": 1, "tool": "s3.get", "effect": "read",
             "args": {"bucket": bucket, "key": "missing.txt", "dest": "metrics/missing.txt"}},
        ]})
        waiting_id = await api.start(put(bucket, "waiting.txt", "y", approval="required"))
        await card_of(api, waiting_id)
        during = await scrape(address)
        await api.cancel(waiting_id, reason="not today", requester="erin")
        cancelled = await api.result(waiting_id)
    after = await scrape(address)
    reports = [approved, skipped, refused, violated, cancelled]
    assert [r.status for r in reports] == [
        "succeeded", "succeeded", "failed", "failed", "cancelled"
    ]
    assert skipped.step(1).state == "SKIPPED"
    assert refused.failure is not None and refused.failure.status == 412
    assert violated.failure is not None and violated.failure.code == "precondition_unmet"
    mine = {"task_queue": queue}

    # each condition read, by probe, system and outcome: the reports' own checks, no more
    probes = by(after, "plangate_probes", ("probe", "outcome"), system="s3", **mine)
    assert probes == {
        # post of the approved write; the skip read of the one already in place
        ("object_content_equals", "holds"): 2,
        # skip reads and the re-probe after the approval, the 412's re-evaluate
        ("object_content_equals", "violated"): 5,
        # the version each write without if_match carries (and the approved write's, read
        # again at the call, in its activity)
        ("object_version", "holds"): 5,
        ("object_exists", "violated"): 1,
    }
    assert Counter({k: int(v) for k, v in probes.items()}) == probes_read(reports)
    assert after.value("plangate_probes", outcome="violated", **mine) == 6

    # the router's answers: the skip, the 412 re-planned, the violated pre re-planned (a run
    # with no re-plans left then fails); a run that succeeds or is cancelled has none
    assert by(after, "plangate_answers", ("kind", "tool"), **mine) == {
        ("skip", "s3.put"): 1, ("replan", "s3.put"): 1, ("replan", "s3.get"): 1,
    }

    # tool calls, the 412 refused, the windows of the one call that answered
    assert by(after, "plangate_tool_calls", ("tool", "status"), **mine) == {
        ("s3.put", "200"): 1, ("s3.put", "412"): 1,
    }
    assert by(after, "plangate_tool_refusals", ("tool", "status"), **mine) == {
        ("s3.put", "412"): 1,
    }
    answered_calls = after.value("plangate_tool_calls", status="200", **mine)
    for window in ("plangate_check_to_use", "plangate_plan_to_use"):
        assert after.value(f"{window}_count", tool="s3.put", **mine) == answered_calls == 1
    window_ms = approved.step(1).check_to_use_ms
    assert window_ms is not None
    assert abs(after.value("plangate_check_to_use_sum", **mine) - window_ms) <= 1

    # approvals: one waits while the other was answered; cancelling its run ends its wait
    def waiting(scraped: Scrape) -> float:
        return scraped.value("plangate_approvals_requested", **mine) - scraped.value(
            "plangate_approvals_answered", **mine
        )

    assert by(during, "plangate_approvals_answered", ("result",), **mine) == {("approved",): 1}
    assert waiting(during) == 1
    assert after.value("plangate_approvals_requested", tool="s3.put", **mine) == 2
    assert by(after, "plangate_approvals_answered", ("result",), **mine) == {
        ("approved",): 1, ("cancelled",): 1,
    }
    assert waiting(after) == 0
    assert by(after, "plangate_approval_wait_count", ("result",), **mine) == {
        ("approved",): 1, ("cancelled",): 1,
    }

    # Temporal's own runtime metrics are on the same endpoint
    # the runs that did not succeed fail their executions (Temporal's views tell the truth)
    assert after.value("temporal_workflow_completed", workflow_type="PlanRun", **mine) == 2
    assert after.value("temporal_workflow_failed", workflow_type="PlanRun", **mine) == 3
    assert after.value("temporal_request", operation="RespondWorkflowTaskCompleted") > 0
    # a client's requests are counted by its own runtime: the three runs started through the
    # worker's client are here, the two started through the session's client are not
    assert after.value("temporal_request", operation="StartWorkflowExecution", **mine) == 3

    # replaying the five histories on the same runtime (the replayer hands its workflows this
    # runtime's meter) records nothing of plangate's: the meter is silent while replaying
    histories = [
        await client.get_workflow_handle(r.run_id).fetch_history() for r in reports
    ]
    replayer = Replayer(
        workflows=[], plugins=[PlangateWorkerPlugin()], runtime=metrics.runtime(address)
    )
    for history in histories:
        await replayer.replay_workflow(history)
    replayed = await scrape(address)
    assert replayed.samples("plangate_") == after.samples("plangate_")


@pytest.mark.parametrize("good", ["127.0.0.1:9464", " 0.0.0.0:1 ", "[::]:9464", "[::1]:65535"])
def test_a_metrics_address_is_an_ip_and_a_port(good):
    obs = Settings.from_env({"PLANGATE_METRICS_ADDRESS": good}).observability
    assert obs.metrics_address == good.strip()


@pytest.mark.parametrize("bad", [
    "localhost:9464", "9464", ":9464", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536",
    "::1:9464", "[::1]", "http://127.0.0.1:9464", "127.0.0.1:94a",
])
def test_a_metrics_address_that_cannot_be_bound_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="PLANGATE_METRICS_ADDRESS must be an IP address"):
        Settings.from_env({"PLANGATE_METRICS_ADDRESS": bad})


def test_no_metrics_address_serves_nothing():
    assert Settings.from_env({}).observability.metrics_address is None
    blank = Settings.from_env({"PLANGATE_METRICS_ADDRESS": " "})
    assert blank.observability.metrics_address is None


def test_a_worker_whose_metrics_port_is_taken_says_so_in_one_line(monkeypatch, capsys):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        address = f"127.0.0.1:{holder.getsockname()[1]}"
        monkeypatch.setenv("PLANGATE_METRICS_ADDRESS", address)
        # before any connection: no Temporal, Postgres or S3 is asked
        monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
        assert main(["worker"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"plangate: PLANGATE_METRICS_ADDRESS: cannot serve metrics on {address}")
    assert "Address already in use" in err


def test_a_bad_metrics_address_is_bad_usage(monkeypatch, capsys):
    monkeypatch.setenv("PLANGATE_METRICS_ADDRESS", "localhost:9464")
    assert main(["worker"]) == 2
    assert "PLANGATE_METRICS_ADDRESS must be" in capsys.readouterr().err
