"""The errors a caller of the Python API catches about one run (and the approver's key to
answer it with); each is importable from ``plangate``. Light: ``import plangate`` loads it."""

from __future__ import annotations

from plangate.errors import PlangateError, RunError

__all__ = [
    "AnswerRefused", "NoApproverKey", "NoWorkerAnswered", "RunEnded", "RunIdInUse",
    "SearchAttributesMissing", "UnknownRun",
]


class UnknownRun(RunError, LookupError):
    """No run with this id in the namespace."""


class RunIdInUse(RunError, ValueError):
    """A run with this id is running."""


class RunEnded(RunError, ValueError):
    """The run has already ended (nothing to cancel)."""


class AnswerRefused(RunError, ValueError):
    """An approval answer the run refused (the message says why); nothing was recorded."""


class NoApproverKey(PlangateError, ValueError):
    """This process holds no approver's key to sign an answer with (or not the one asked)."""


class NoWorkerAnswered(RunError, TimeoutError):
    """No worker answered the run's report query in time (none polls its task queue, or all
    are busy or gone), or, a team's workflow, none with plangate's guard (PlangatePlugin)
    answers it; the message says what Temporal knows of the run."""

    def __init__(self, message: str, execution_status: str) -> None:
        super().__init__(message)
        self.execution_status = execution_status


class SearchAttributesMissing(RunError, RuntimeError):
    """The namespace lacks plangate's search attributes: runs cannot be found by status."""
