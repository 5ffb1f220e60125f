"""The client is light (issue 20): the Python API and ``plangate check`` load no S3, Postgres
or model client, and address a run by the names of its Temporal interface, never by the
workflow's class."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from plangate.records import interface
from plangate.temporal.guards import activity_name
from plangate.workflows.plan_run import PlanRunWorkflow

HEAVY = ("boto3", "botocore", "psycopg", "psycopg_pool", "openai")


def loaded_after(code: str, cwd: Path, env: dict[str, str] | None = None) -> list[str]:
    probe = f"{code}\nimport sys\nprint([m for m in {HEAVY!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", probe], cwd=cwd, env=env, check=True,
                         capture_output=True, text=True, timeout=60)
    return list(json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"')))


def test_the_api_loads_no_s3_postgres_or_model_client(tmp_path):
    assert loaded_after("from plangate import Plangate\nPlangate", tmp_path) == []


def is_loaded_after(code: str, module: str, cwd: Path) -> bool:
    probe = f"{code}\nimport sys\nprint({module!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=cwd, check=True,
                         capture_output=True, text=True, timeout=60)
    return {"True": True, "False": False}[out.stdout.strip().splitlines()[-1]]


def test_the_api_loads_temporals_client_only_to_connect(tmp_path):
    assert not is_loaded_after("from plangate import Plangate", "temporalio.client", tmp_path)


def test_plangate_check_loads_no_s3_postgres_or_model_client(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"goal": "g", "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": "vendor-drops", "key": "k.csv", "dest": "k.csv"}},
        {"n": 2, "tool": "warehouse.load", "depends_on": [1],
         "args": {"target": "staging.t", "source": "k.csv"}},
    ]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLANGATE_")}
    env.update(TEMPORAL_CONFIG_FILE=os.devnull, PLANGATE_WORKDIR=str(tmp_path / "work"))
    code = (
        "from plangate.cli import main\n"
        f"assert main(['check', {str(plan)!r}]) == 0\n"
    )
    assert loaded_after(code, tmp_path, env) == []


def test_the_client_names_what_the_workflow_defines():
    defn = PlanRunWorkflow.__temporal_workflow_definition  # type: ignore[attr-defined]
    assert defn.name == interface.PLAN_RUN
    assert interface.REPORT_QUERY in defn.queries
    assert {interface.APPROVE_UPDATE, interface.REJECT_UPDATE} <= set(defn.updates)
    assert {interface.ANSWER_SIGNAL, interface.CANCEL_SIGNAL} <= set(defn.signals)


def registered(worker: Any) -> dict[str, str]:
    """The activities a built worker registers, plugins' included: name -> function name."""
    acts = worker.config(active_config=True)["activities"]
    return {activity_name(fn) or "": fn.__name__ for fn in acts}


async def test_every_name_the_interface_declares_is_what_the_workers_register(client, settings):
    import uuid
    from dataclasses import replace

    from temporalio.worker import Worker

    from plangate.temporal import PlangatePlugin
    from plangate.worker.assembly import CatalogueAnnouncement, build_worker

    # a queue of its own: one worker a queue and client
    own = replace(settings, temporal=replace(settings.temporal,
                                             task_queue=f"names-{uuid.uuid4().hex[:8]}"))
    worker = await build_worker(client, own, bootstrap=False)
    ours = registered(worker)
    assert set(interface.WORKER_ACTIVITIES) <= set(ours), ours
    # each by the function it is: a name the workflows call by is the one the decorator gives
    assert {n: ours[n] for n in interface.WORKER_ACTIVITIES} == {
        interface.GUARD_ACTIVITY: "resolve", interface.APPROVERS_ACTIVITY: "approvers",
        interface.DECIDE_ACTIVITY: "decide",
        interface.PROBE_ACTIVITY: "evaluate", interface.PROPOSE_ACTIVITY: "propose",
        interface.REVIEW_ACTIVITY: "review", interface.WINDOWS_ACTIVITY: "record",
        interface.INDEX_ACTIVITY: "record", interface.GRANT_COVER_ACTIVITY: "cover"}
    types = {w.__temporal_workflow_definition.name  # type: ignore[attr-defined]
             for w in worker.config(active_config=True)["workflows"]}
    assert types == {interface.PLAN_RUN, interface.REPLAN_WORKFLOW}
    [announcing] = [p for p in worker.config()["plugins"] or ()
                    if isinstance(p, CatalogueAnnouncement)]
    assert set(registered(announcing.poller)) == {interface.CATALOGUE_ACTIVITY}
    team = Worker(client, task_queue=f"names-{uuid.uuid4().hex[:8]}", activities=[],
                  plugins=[PlangatePlugin({}, settings=settings)])
    assert registered(team) == {interface.TEAM_CHECK_ACTIVITY: "check",
                                interface.TEAM_READ_ACTIVITY: "read",
                                interface.TEAM_APPROVERS_ACTIVITY: "approvers"}


def test_every_error_a_caller_sees_is_a_plangate_error_and_in_the_tree():
    from plangate import errors
    from plangate.activities.bootstrap import SchemaNotReady
    from plangate.activities.extensions import ExtensionError
    from plangate.client.api import (
        AnswerRefused,
        NoApproverKey,
        RunEnded,
        RunIdInUse,
        SearchAttributesMissing,
        UnknownRun,
    )
    from plangate.dev._stack import StackError
    from plangate.plans.load import PlanError
    from plangate.records.signing import KeyProblem
    from plangate.replanner.planner import NoModel, PlanningUnavailable
    from plangate.servers.codec import CodecServerRefused
    from plangate.worker.encryption import DecryptionError
    from plangate.worker.metrics import MetricsError
    from plangate.worker.tracing import TracingUnavailable
    from plangate.world.errors import ToolError

    classes = [
        PlanError, errors.ConfigurationError, KeyProblem, MetricsError, TracingUnavailable,
        CodecServerRefused, errors.ServiceUnreachable, SchemaNotReady, ExtensionError,
        StackError, PlanningUnavailable, NoModel, DecryptionError, errors.RunError, UnknownRun,
        RunIdInUse, RunEnded, AnswerRefused, SearchAttributesMissing, NoApproverKey, ToolError,
    ]
    tree = errors.__doc__ or ""
    for cls in classes:
        assert issubclass(cls, errors.PlangateError), cls
        assert f" {cls.__name__} " in tree, f"{cls.__name__} is not drawn in plangate.errors"
    # each keeps the built-in base callers caught it by
    assert issubclass(PlanError, ValueError) and issubclass(UnknownRun, LookupError)


async def test_a_checked_plan_starts_as_it_is_and_the_worker_checks_it_again(client, settings):
    from dataclasses import replace

    import pytest
    from temporalio.service import RPCError

    from plangate.client.api import Plangate
    from plangate.client.checked import Checked
    from plangate.plans.load import PlanError, parse_plan
    from plangate.testing import running_worker, scheduled

    bad = {"goal": "read a file no deployment has", "steps": [
        {"n": 1, "tool": "files.nowhere", "effect": "read", "args": {"path": "a.txt"}}]}
    async with running_worker(client, settings) as h:
        api = Plangate(client, h.settings)
        with pytest.raises(PlanError, match=r"files\.nowhere"):
            api.check(bad)
        # what check returns is started as it is: here a Checked built by hand, which only the
        # worker's own check stands between and the effect
        run_id = await api.start(Checked(parse_plan(bad), [], h.settings))
        rep = await api.result(run_id)
        assert rep.status == "failed" and rep.failure is not None
        assert rep.failure.code == "bad_plan" and "files.nowhere" in rep.failure.detail
        assert set(await scheduled(client, run_id)) == {"guard.resolve"}
        # checked for other settings: checked again by this client, and nothing starts
        other = replace(h.settings, temporal=replace(h.settings.temporal, task_queue="elsewhere"))
        elsewhere = Checked(parse_plan(bad), [], other)
        with pytest.raises(PlanError, match=r"files\.nowhere"):
            await api.start(elsewhere, run_id="never-started-" + run_id)
        with pytest.raises(RPCError):
            await client.get_workflow_handle("never-started-" + run_id).describe()


def test_the_staleness_report_loads_no_workflow_code(tmp_path):
    # it names the workflow type by the interface (loading the workflow cost its start 75 ms)
    assert not is_loaded_after("import plangate.client.reporting, plangate.cli.services",
                               "plangate.workflows.plan_run", tmp_path)
    assert is_loaded_after("import plangate.worker.assembly", "plangate.workflows.plan_run",
                           tmp_path)
