"""The workflow sandbox, set once: plangate passed through it but for the modules that define
its workflows. plangate's worker and replayer take it from ``assembly.PlangateWorkerPlugin``
(``passing_plangate``), a team's worker from ``plangate.temporal``'s (``passthrough_only``),
so no workflow module wraps its imports in ``imports_passed_through``.

The sandbox passes a module through when it or a parent package is listed, so the list names
every plangate module beside the path to a workflow module, never a parent of one: the two
workflow modules (``SANDBOXED``) are re-imported for each run and checked by the sandbox as they
run, as the SDK does for any workflow module; the code they call is imported once, outside. Its
determinism is held by its layer (workflow code imports nothing that touches the world:
``lint-imports``) and by the recorded histories, which must replay (``tests/test_replay.py``).

The sandbox's code strings compiled once (``CompiledOnceSandbox``): the SDK (1.35) enters a
sandboxed workflow by ``exec`` of a few fixed strings, at every activation and for every
payload of a workflow task it encodes or decodes (its serialization context), compiling them
each time: 13% of a guarded step's worker CPU (issue 39). The code run is the same. And a
payload's serialization context, asked twice for every payload (about 10 times a guarded step),
is asked of the sandboxed instance directly rather than by ``exec`` with the importer applied:
56 against 10 us a time under load, 0.44 ms of a step's CPU (issue 50). It is
plangate's own worker's only: it subclasses the SDK's private ``_Instance``, which a team's
worker must not be handed by a plugin (issue 49)."""

from __future__ import annotations

import functools
import importlib.util
import pkgutil
from dataclasses import dataclass, replace
from types import CodeType
from typing import Any

from temporalio.converter import SerializationContext
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

try:  # the SDK's own sandboxed instance: private, so its absence leaves the SDK's runner
    from temporalio.worker._command_aware_visitor import CommandInfo
    from temporalio.worker.workflow_sandbox._runner import _Instance
except ImportError:  # pragma: no cover - another SDK layout
    _Instance = None  # type: ignore[assignment,misc]

SANDBOXED = ("plangate.workflows.plan_run", "plangate.replanner.workflow")
# Import hooks a process may carry, passed through so the sandbox does not import them again at
# each workflow instance: beartype's claw (installed by py-key-value-aio, which fastmcp and so
# pydantic-ai import) imports beartype from its loader at every module load. In the sandbox
# that re-imported beartype for every run made (under pytest, its asserts rewritten too): 100
# runs at once in such a process took 194 s where they take 5, their workflow tasks timing out.
IMPORT_HOOKS = ("beartype",)


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


@functools.lru_cache(maxsize=64)
def compiled(code: str) -> CodeType:
    """``code`` as ``exec`` compiles a string (the SDK's strings are a handful, fixed but for
    the workflow class's import)."""
    return compile(code, "<string>", "exec")


_COMPILES = _Instance is not None and callable(getattr(_Instance, "_run_code", None))

if _COMPILES:
    class _CompiledOnce(_Instance):
        def _run_code(self, code: str, **extra_globals: Any) -> None:
            super()._run_code(compiled(code), **extra_globals)  # type: ignore[arg-type]

        def get_serialization_context(
            self, command_info: CommandInfo | None
        ) -> SerializationContext | None:
            # asked for every payload a workflow task decodes or encodes, twice each: the SDK
            # asks the instance in the sandbox through ``exec``, its importer applied. The
            # answer is a context built from the run's info and its pending commands, importing
            # nothing, so the instance is asked directly: the same answer, without the exec.
            inner: Any = self.globals_and_locals.get("__temporal_in_sandbox")
            if inner is None:  # pragma: no cover - not yet made (the SDK asks only after)
                return super().get_serialization_context(command_info)
            context: SerializationContext | None = inner.get_serialization_context(command_info)
            return context


@dataclass(frozen=True)
class CompiledOnceSandbox(SandboxedWorkflowRunner):
    """The SDK's sandbox, its code strings compiled once; the SDK's own where its private
    instance class is not the one this was written against."""

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        if not _COMPILES:  # pragma: no cover - another SDK layout
            return super().create_instance(det)
        instance: WorkflowInstance = _CompiledOnce(det, self.runner_class, self.restrictions)
        return instance


def passing_plangate(runner: WorkflowRunner | None) -> WorkflowRunner:
    """plangate's own worker and replayer: ``runner`` (none: the SDK's default sandbox) with
    plangate passed through (``passthrough_only``), the SDK's own sandbox made a
    ``CompiledOnceSandbox``."""
    runner = SandboxedWorkflowRunner() if runner is None else runner
    if type(runner) is SandboxedWorkflowRunner:
        runner = CompiledOnceSandbox(restrictions=runner.restrictions,
                                     runner_class=runner.runner_class)
    return passthrough_only(runner)


def passthrough_only(runner: WorkflowRunner | None) -> WorkflowRunner:
    """A team's worker and replayer (``plangate.temporal``): its runner as it is, plangate's
    modules added to its sandbox's passthrough modules and nothing else changed, as Temporal's
    own plugins do; a runner that is not a sandbox, as it is. None (no runner yet): the SDK's
    default sandbox."""
    runner = SandboxedWorkflowRunner() if runner is None else runner
    if not isinstance(runner, SandboxedWorkflowRunner):
        return runner
    return replace(runner, restrictions=runner.restrictions.with_passthrough_modules(
        *passed_through(), *IMPORT_HOOKS))
