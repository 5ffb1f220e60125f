"""Whose files: each run, and each read answered without a run, has a directory of its own
under the work directory (``world.files``). Its name is a digest of what Temporal says of the
call (``activities.workspace``), never of what the call says of itself, so no caller can name
another run's directory."""

from __future__ import annotations

import hashlib
import re

from plangate.world.paths import PathOutsideWorkdir

SCOPE = re.compile(r"^(run|read)-[0-9a-f]{32}$")


def _digest(*parts: str) -> str:
    # NUL never occurs in a workflow or activity id that Temporal takes: the parts stay apart
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def run_scope(workflow_id: str, tag: str) -> str:
    """A run's chain (continue-as-new, reset): its workflow id and the tag of its keys."""
    return "run-" + _digest("chain", workflow_id, tag)


def execution_scope(workflow_id: str, workflow_run_id: str) -> str:
    """One execution of a workflow whose keys carry no tag of this workflow's: its own."""
    return "run-" + _digest("execution", workflow_id, workflow_run_id)


def call_scope(activity_id: str, activity_run_id: str, attempt: int) -> str:
    """A standalone activity's attempt (a read without a run): removed when it ends."""
    return "read-" + _digest("call", activity_id, activity_run_id, str(attempt))


class NoScope(PathOutsideWorkdir):
    """A file operation for no run: a probe's reader, a call the worker could place nowhere."""


def checked(scope: str) -> str:
    if not SCOPE.match(scope):
        raise NoScope(f"{scope!r} names no run's directory: this call has no local files")
    return scope
