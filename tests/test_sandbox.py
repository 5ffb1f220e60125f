"""The workflow sandbox passes plangate through, set once (``plangate.worker.sandbox``): on
plangate's worker and replayer and on a team's worker, a team's own sandbox settings kept; no
module of plangate's wraps its imports in ``imports_passed_through``."""

from __future__ import annotations

import ast
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from temporalio.worker import Replayer, UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

import plangate
from plangate.temporal import PlangatePlugin as TeamPlugin
from plangate.worker.assembly import PlangatePlugin, build_worker


def passed_through(runner: Any) -> set[str]:
    assert isinstance(runner, SandboxedWorkflowRunner), runner
    return set(runner.restrictions.passthrough_modules)


async def test_plangates_worker_and_replayer_pass_plangate_through(client, settings):
    own = replace(settings, temporal=replace(settings.temporal,
                                             task_queue=f"sandbox-{uuid.uuid4().hex[:8]}"))
    worker = await build_worker(client, own, bootstrap=False)
    assert "plangate" in passed_through(worker.config(active_config=True)["workflow_runner"])
    replayer = Replayer(workflows=[], plugins=[PlangatePlugin()])
    assert "plangate" in passed_through(replayer.config(active_config=True)["workflow_runner"])


async def test_a_teams_worker_keeps_its_sandbox_with_plangate_added(client, settings):
    def team_worker(runner: Any) -> Worker:  # a queue each: one worker a queue and client
        return Worker(client, task_queue=f"sandbox-{uuid.uuid4().hex[:8]}", activities=[],
                      workflow_runner=runner,
                      plugins=[TeamPlugin({}, settings=settings)])

    own = SandboxedWorkflowRunner()
    own = replace(own, restrictions=own.restrictions.with_passthrough_modules("team_models"))
    runner = team_worker(own).config(active_config=True)["workflow_runner"]
    assert {"plangate", "team_models"} <= passed_through(runner)
    unsandboxed = UnsandboxedWorkflowRunner()
    assert team_worker(unsandboxed).config(active_config=True)["workflow_runner"] is unsandboxed


def test_no_plangate_module_wraps_its_imports():
    root = Path(plangate.__file__).parent
    wrapping = [
        f"{path.relative_to(root)}:{node.lineno}"
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.With) and "imports_passed_through" in ast.unparse(node.items[0])
    ]
    assert wrapping == []
