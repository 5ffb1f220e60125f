"""The workflow sandbox, set once: plangate passed through it but for the modules that define
its workflows. plangate's worker and replayer take it from ``assembly.PlangatePlugin``, a team's
worker from ``plangate.temporal``'s, so no workflow module wraps its imports in
``imports_passed_through``.

The sandbox passes a module through when it or a parent package is listed, so the list names
every plangate module beside the path to a workflow module, never a parent of one: the two
workflow modules (``SANDBOXED``) are re-imported for each run and checked by the sandbox as they
run, as the SDK does for any workflow module; the code they call is imported once, outside. Its
determinism is held by its layer (workflow code imports nothing that touches the world:
``lint-imports``) and by the recorded histories, which must replay (``tests/test_replay.py``)."""

from __future__ import annotations

import functools
import importlib.util
import pkgutil
from dataclasses import replace

from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

SANDBOXED = ("plangate.workflows.plan_run", "plangate.replanner.workflow")


@functools.cache
def passed_through() -> tuple[str, ...]:
    """Every plangate module or package that is neither in ``SANDBOXED`` nor a parent of one
    (found without importing them)."""
    parents = {m.rsplit(".", i)[0] for m in SANDBOXED for i in range(1, m.count(".") + 1)}
    names: list[str] = []
    for package in sorted(parents):
        spec = importlib.util.find_spec(package)
        where = spec.submodule_search_locations if spec is not None else None
        for info in pkgutil.iter_modules(list(where or ())):
            name = f"{package}.{info.name}"
            if name not in parents and name not in SANDBOXED:
                names.append(name)
    return tuple(names)


def passing_plangate(runner: WorkflowRunner | None) -> WorkflowRunner:
    """``runner`` (none: the SDK's default sandbox) with plangate passed through, its other
    settings kept; a runner that is not a sandbox, as it is."""
    runner = SandboxedWorkflowRunner() if runner is None else runner
    if not isinstance(runner, SandboxedWorkflowRunner):
        return runner
    return replace(runner, restrictions=runner.restrictions.with_passthrough_modules(
        *passed_through()))
