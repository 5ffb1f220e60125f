"""Traces (``plangate.worker.tracing``): with an OTLP endpoint configured, a run's workflow, its
activities, its steps and its probes are spans of one trace, received by a collector."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from plangate.client.connection import connect
from plangate.testing import running_worker
from plangate.worker import tracing
from plangate.world.settings import Settings
from tests.fake_otlp import FakeCollector, Span


async def test_a_run_is_one_trace_of_steps_and_probes(settings, s3):
    bucket = f"traced-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    plan = {"goal": "publish", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.put", "args": {"bucket": bucket, "key": "a.txt", "body": "a"}},
        {"n": 2, "tool": "warehouse.run_sql", "depends_on": [1],
         "args": {"statement": "select_one"}},
    ]}
    with FakeCollector() as otlp:
        obs = replace(settings.observability, otlp_traces_endpoint=otlp.endpoint)
        traced = replace(settings, observability=obs)
        try:
            client = await connect(traced)
            async with running_worker(client, traced) as h:
                rep = await h.run(plan)
            tracing.flush()
        finally:
            tracing.shutdown()
    assert rep.status == "succeeded"
    by_name: dict[str, list[Span]] = {}
    for s in otlp.spans:
        by_name.setdefault(s.name, []).append(s)
    [start] = by_name["StartWorkflow:PlanRun"]
    assert by_name["RunWorkflow:PlanRun"]
    [put] = by_name["step 1 s3.put"]
    [sql] = by_name["step 2 warehouse.run_sql"]
    assert put.attributes == {"plangate.run_id": rep.run_id, "plangate.step": 1,
                              "plangate.plan_version": 1, "plangate.tool": "s3.put"}
    # each step's span is a child of its activity's span, all of the run's one trace
    ids = {s.span_id: s for s in otlp.spans}
    assert ids[put.parent_id].name == "RunActivity:s3.put"
    assert ids[sql.parent_id].name == "RunActivity:warehouse.run_sql"
    probes = by_name["probe object_content_equals"]
    assert {p.attributes["plangate.outcome"] for p in probes} >= {"holds"}
    assert {s.trace_id for s in (put, sql, *probes)} == {start.trace_id}





@pytest.mark.parametrize(("env", "problem"), [
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318"}, "must be an http"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://x"}, "OTEL_EXPORTER_OTLP_ENDPOINT must be"),
])
def test_a_bad_endpoint_names_the_variable(env, problem):
    with pytest.raises(ValueError, match=problem):
        Settings.from_env(env)


def test_the_endpoint_comes_from_opentelemetrys_own_variables():
    base = Settings.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318/"})
    assert base.observability.otlp_traces_endpoint == "http://otel:4318/v1/traces"
    assert Settings.from_env({}).observability.otlp_traces_endpoint is None
    assert tracing.interceptors(Settings().observability) == []
