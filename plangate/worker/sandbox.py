"""The workflow sandbox, set once: ``plangate`` passed through it. plangate's worker and replayer
take it from ``assembly.PlangatePlugin``, a team's worker from ``plangate.temporal``'s, so no
workflow module wraps its imports in ``imports_passed_through``.

Passed through, plangate is imported once, outside the sandbox, and its workflow code is neither
re-imported for each run nor checked by the sandbox as it runs: its determinism is held by its
layer (workflow code imports nothing that touches the world: ``lint-imports``) and by the
recorded histories, which must replay (``tests/test_replay.py``)."""

from __future__ import annotations

from dataclasses import replace

from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

PASSED_THROUGH = ("plangate",)


def passing_plangate(runner: WorkflowRunner | None) -> WorkflowRunner:
    """``runner`` (none: the SDK's default sandbox) with plangate passed through, its other
    settings kept; a runner that is not a sandbox, as it is."""
    runner = SandboxedWorkflowRunner() if runner is None else runner
    if not isinstance(runner, SandboxedWorkflowRunner):
        return runner
    return replace(runner, restrictions=runner.restrictions.with_passthrough_modules(
        *PASSED_THROUGH))
