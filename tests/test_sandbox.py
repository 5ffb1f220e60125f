"""The workflow sandbox passes plangate through but for its two workflow modules, set once
(``plangate.worker.sandbox``): on plangate's worker and replayer and on a team's worker, a team's
own sandbox settings kept; no module of plangate's wraps its imports in
``imports_passed_through``."""

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
from plangate.testing import running_worker
from plangate.worker.assembly import PlangateWorkerPlugin, build_worker
from plangate.worker.sandbox import SANDBOXED, CompiledOnceSandbox, compiled


def passed_through(runner: Any) -> set[str]:
    assert isinstance(runner, SandboxedWorkflowRunner), runner
    return set(runner.restrictions.passthrough_modules)


def passes(runner: Any, module: str) -> bool:
    """The sandbox's own rule: a module passes when it or a parent package is listed."""
    listed = passed_through(runner)
    parts = module.split(".")
    return any(".".join(parts[:i]) in listed for i in range(1, len(parts) + 1))


def plangate_passed_but_its_workflows(runner: Any) -> None:
    for module in ("plangate.workflows.step", "plangate.records.interface", "plangate.errors",
                   "plangate.replanner.review", "plangate.temporal.workflow_guard"):
        assert passes(runner, module), module
    # re-imported for each run and checked by the sandbox as they run
    for module in SANDBOXED:
        assert not passes(runner, module), module


async def test_plangates_worker_and_replayer_pass_plangate_through(client, settings):
    own = replace(settings, temporal=replace(settings.temporal,
                                             task_queue=f"sandbox-{uuid.uuid4().hex[:8]}"))
    worker = await build_worker(client, own, bootstrap=False)
    plangate_passed_but_its_workflows(worker.config(active_config=True)["workflow_runner"])
    replayer = Replayer(workflows=[], plugins=[PlangateWorkerPlugin()])
    plangate_passed_but_its_workflows(replayer.config(active_config=True)["workflow_runner"])


async def test_a_teams_worker_keeps_its_sandbox_with_plangate_added(client, settings):
    def team_worker(runner: Any) -> Worker:  # a queue each: one worker a queue and client
        return Worker(client, task_queue=f"sandbox-{uuid.uuid4().hex[:8]}", activities=[],
                      workflow_runner=runner,
                      plugins=[TeamPlugin({}, settings=settings)])

    own = SandboxedWorkflowRunner()
    own = replace(own, restrictions=own.restrictions.with_passthrough_modules("team_models"))
    runner = team_worker(own).config(active_config=True)["workflow_runner"]
    assert "team_models" in passed_through(runner)
    plangate_passed_but_its_workflows(runner)
    unsandboxed = UnsandboxedWorkflowRunner()
    assert team_worker(unsandboxed).config(active_config=True)["workflow_runner"] is unsandboxed


async def test_the_sandbox_compiles_its_code_once(client, settings):
    """The sandbox enters a workflow by ``exec`` of a few strings, at every activation and every
    payload: compiled once, then reused, while every run still runs in the sandbox."""
    own = replace(settings, temporal=replace(settings.temporal,
                                             task_queue=f"sandbox-{uuid.uuid4().hex[:8]}"))
    worker = await build_worker(client, own, bootstrap=False)
    assert isinstance(worker.config(active_config=True)["workflow_runner"], CompiledOnceSandbox)
    before = compiled.cache_info()
    plan = {"goal": "compiled once", "steps": [
        {"n": n, "tool": "warehouse.run_sql", "args": {"statement": "select_one"}}
        for n in (1, 2, 3)]}
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    assert rep.status == "succeeded" and [s.state for s in rep.steps] == ["DONE"] * 3
    after = compiled.cache_info()
    # every activation and payload of the run went through it: far more uses than strings
    assert after.hits - before.hits >= 10, (before, after)
    assert after.currsize <= 16, after


async def test_a_payloads_serialization_context_is_asked_without_exec(
    client, settings, monkeypatch
):
    """Every payload of a workflow task asks the instance for its serialization context: the
    instance in the sandbox is asked directly, never through the sandbox's ``exec``, and
    answers as the SDK's own way of asking it does (the workflow's or the activity's)."""
    from temporalio.converter import ActivitySerializationContext
    from temporalio.worker.workflow_sandbox._runner import _Instance

    from plangate.worker.sandbox import _CompiledOnce

    execs: list[str] = []
    asked: list[Any] = []
    sdk_run_code = _Instance._run_code
    ours = _CompiledOnce.get_serialization_context

    def run_code(self: Any, code: Any, **extra: Any) -> None:
        execs.append(code if isinstance(code, str) else " ".join(code.co_names))
        sdk_run_code(self, code, **extra)

    def context(self: Any, info: Any) -> Any:
        before = len(execs)
        answer = ours(self, info)
        exec_used = any("get_serialization_context" in str(c) for c in execs[before:])
        asked.append((answer, _Instance.get_serialization_context(self, info), exec_used))
        return answer

    monkeypatch.setattr(_Instance, "_run_code", run_code)
    monkeypatch.setattr(_CompiledOnce, "get_serialization_context", context)
    plan = {"goal": "contexts", "steps": [
        {"n": n, "tool": "warehouse.run_sql", "args": {"statement": "select_one"}}
        for n in (1, 2)]}
    async with running_worker(client, settings) as h:
        rep = await h.run(plan)
    assert rep.status == "succeeded" and [s.state for s in rep.steps] == ["DONE"] * 2
    assert len(asked) >= 8, len(asked)  # both steps' calls, results and summaries at least
    assert [used for _, _, used in asked] == [False] * len(asked)
    assert [ours for ours, _, _ in asked] == [sdk for _, sdk, _ in asked]
    kinds = {type(ours).__name__ for ours, _, _ in asked}
    assert {"WorkflowSerializationContext", ActivitySerializationContext.__name__} <= kinds


def test_no_plangate_module_wraps_its_imports():
    root = Path(plangate.__file__).parent
    wrapping = [
        f"{path.relative_to(root)}:{node.lineno}"
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.With) and "imports_passed_through" in ast.unparse(node.items[0])
    ]
    assert wrapping == []


async def test_a_teams_runner_and_restrictions_are_kept_but_plangate_passed(client, settings):
    """The plugin changes a team's sandbox as Temporal's own plugins do: its runner's class,
    runner class and every restriction (its own passthrough modules, its invalid module
    members) kept, plangate's modules added to the passthrough modules, nothing removed; the
    compile-once sandbox (the SDK's private instance subclassed) is plangate's own worker's."""
    from temporalio.worker.workflow_sandbox import SandboxMatcher

    from plangate.worker.sandbox import IMPORT_HOOKS
    from plangate.worker.sandbox import passed_through as plangates

    base = SandboxedWorkflowRunner().restrictions
    restrictions = replace(
        base.with_passthrough_modules("team_models"),
        invalid_module_members=base.invalid_module_members | SandboxMatcher.nested_child(
            ["team_clock"], SandboxMatcher(use={"now"})))
    own = SandboxedWorkflowRunner(restrictions=restrictions)
    worker = Worker(client, task_queue=f"sandbox-{uuid.uuid4().hex[:8]}", activities=[],
                    workflow_runner=own, plugins=[TeamPlugin({}, settings=settings)])
    runner = worker.config(active_config=True)["workflow_runner"]
    assert type(runner) is SandboxedWorkflowRunner
    assert runner.runner_class is own.runner_class
    added = set(plangates()) | set(IMPORT_HOOKS)
    assert runner.restrictions.passthrough_modules == restrictions.passthrough_modules | added
    assert runner.restrictions == replace(
        restrictions, passthrough_modules=restrictions.passthrough_modules | added)
    assert runner.restrictions.invalid_module_members is restrictions.invalid_module_members

    class TeamSandbox(SandboxedWorkflowRunner):  # a team's own subclass stays its own
        pass

    theirs = TeamSandbox(restrictions=restrictions)
    worker = Worker(client, task_queue=f"sandbox-{uuid.uuid4().hex[:8]}", activities=[],
                    workflow_runner=theirs, plugins=[TeamPlugin({}, settings=settings)])
    assert type(worker.config(active_config=True)["workflow_runner"]) is TeamSandbox
    # no runner given: the SDK's default sandbox, plangate passed
    worker = Worker(client, task_queue=f"sandbox-{uuid.uuid4().hex[:8]}", activities=[],
                    plugins=[TeamPlugin({}, settings=settings)])
    default = worker.config(active_config=True)["workflow_runner"]
    assert type(default) is SandboxedWorkflowRunner
    assert default.restrictions == replace(
        base, passthrough_modules=base.passthrough_modules | added)
