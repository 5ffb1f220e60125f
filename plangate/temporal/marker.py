"""Fail closed by choice: a team's activity marked ``@guarded`` (or whose body calls
``require_guard()`` first) runs only for a call plangate's guard at the call admitted. A worker
without ``PlangatePlugin`` that registers it, a plugin whose table does not name it, a direct
call of the function: each is refused (403 ``guard_missing``, non-retryable), its body not run.

The admission is a context variable ``GuardAtCall`` sets around its call of the team's function,
once it verified the call's seal and decided the call, bound to this execution as Temporal's
``activity.info()`` names it (namespace, workflow and run, activity type, id, attempt and task
token). Nothing in the request sets it (no header, no argument). Each activity runs in its own
asyncio task, with its own copy of the context, so an admission is never seen by a concurrent
call; the SDK copies the context into the thread of a sync activity (thread pool), not into a
process pool, where a marked activity is therefore always refused. ``@guarded`` also requires
that the activity Temporal runs is the marked function itself: called from within another
admitted activity, it is refused.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from temporalio import activity
from temporalio.exceptions import ApplicationError

from plangate.activities.call_checks import as_application_error
from plangate.temporal.guards import activity_name
from plangate.world.errors import ToolError

F = TypeVar("F", bound=Callable[..., Any])
Execution = tuple[str, str | None, str | None, str, str, int, bytes]

_ADMITTED: contextvars.ContextVar[Execution | None] = contextvars.ContextVar(
    "plangate_admitted", default=None)


def _execution(info: activity.Info) -> Execution:
    return (info.namespace, info.workflow_id, info.workflow_run_id, info.activity_type,
            info.activity_id, info.attempt, info.task_token)


@contextmanager
def admitting(info: activity.Info) -> Iterator[None]:
    """While the guard calls the team's function for the call ``info`` names: admitted."""
    token = _ADMITTED.set(_execution(info))
    try:
        yield
    finally:
        _ADMITTED.reset(token)


def require_guard() -> None:
    """Refuse (403 ``guard_missing``) unless plangate's guard admitted the activity call this
    runs in: the first line of a team's activity that must never run unguarded."""
    _refuse_unless_admitted(None)


def guarded(fn: F) -> F:
    """The team's activity function, refusing every call plangate's guard did not admit (403
    ``guard_missing``, nothing of the function run). Put it under ``@activity.defn``::

        @activity.defn
        @guarded
        async def issue_credit(req: CreditRequest) -> Credit: ...
    """
    if activity_name(fn) is not None:
        raise TypeError(
            f"plangate.temporal.guarded: {fn.__name__} is already an activity "
            "(@activity.defn applied first: Temporal would run it unmarked): put @guarded "
            "under @activity.defn")
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def marked_async(*args: Any, **kwargs: Any) -> Any:
            _refuse_unless_admitted(marked_async)
            return await fn(*args, **kwargs)
        return cast(F, marked_async)

    @functools.wraps(fn)
    def marked(*args: Any, **kwargs: Any) -> Any:
        _refuse_unless_admitted(marked)
        return fn(*args, **kwargs)
    return cast(F, marked)


def _refuse_unless_admitted(marked: Callable[..., Any] | None) -> None:
    if not activity.in_activity():
        name = getattr(marked, "__name__", "this function")
        raise ApplicationError(
            f"{name}: not run: it runs only as an activity plangate's guard admitted, and "
            "this is no activity", type="guard_missing", non_retryable=True)
    info = activity.info()
    name = info.activity_type
    own = activity_name(marked) if marked is not None else name
    if marked is not None and own != name:
        raise _refusal(f"{own or marked.__name__}: not run: activity {name} runs it (calls it "
                       "from within, or as a dynamic activity), and plangate's guard admits "
                       "a marked function only as its own activity")
    if _ADMITTED.get() != _execution(info):
        raise _refusal(
            f"{name}: not run: it runs only for a call plangate's guard admitted, and no "
            f"guard admitted this one: register PlangatePlugin on this worker, its guard "
            f"table naming {name}")


def _refusal(detail: str) -> ApplicationError:
    # non-retryable: another attempt meets the same worker; not benign: the worker logs it,
    # a worker without the guard is the operator's to mend
    e = as_application_error(ToolError("guard_missing", detail))
    return ApplicationError(e.message, *e.details, type=e.type, non_retryable=True)
