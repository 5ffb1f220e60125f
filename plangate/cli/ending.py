"""How a command ends: the line and exit code of the error it ended with (:func:`failed`),
Ctrl-C while following a run, a reader of stdout that left, and the process's own end
(:func:`leave`).

Whatever a plan, a model or a payload wrote is printed through ``plans.visible``."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from plangate.cli.command import EXIT_NOT_SUCCEEDED, EXIT_USAGE, UsageError
from plangate.client.command import plangate_command
from plangate.plans.load import PlanError, shown
from plangate.plans.visible import visible


def _print_problems(args: argparse.Namespace, problems: Sequence[str]) -> None:
    path = getattr(args, "plan", None)
    if path is not None:
        what = f"plan {path}"
        problems = [p.removeprefix(f"{path}: ") for p in problems]  # the file is named once
    elif getattr(args, "goal", None) is not None:  # plangate plan: the model's answer
        what = f"the model's plan for {shown(args.goal, 80)}"
    else:
        what = "the plan"
    if len(problems) == 1:
        print(visible(f"plangate: {what} rejected: {problems[0]}"), file=sys.stderr)
        return
    print(visible(f"plangate: {what} rejected:"), file=sys.stderr)
    for p in problems:
        print(visible(f"  - {p}"), file=sys.stderr)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 500 else text[:497] + "..."


def interrupted(run_id: str | None) -> None:
    """Ctrl-C while following a run (``run --wait``, ``watch``) stops this command only: the
    run goes on in Temporal. Say how to pick it up again, or to stop it."""
    if run_id is None:
        return
    with contextlib.suppress(OSError, ValueError):
        me = plangate_command()
        fresh = "\n" if sys.stderr.isatty() else ""  # off the line the terminal echoed ^C on
        print(fresh + visible(
            f"plangate: stopped following run {run_id}; it goes on. Follow it: {me} "
            f"watch {run_id} (or {me} status {run_id}); stop it: {me} cancel {run_id}"
        ), file=sys.stderr, flush=True)


def stdout_closed() -> bool:
    """Whether the reader of stdout has gone (``plangate runs | head -1``); if so, stdout
    is pointed at /dev/null so that nothing tries to write the rest, and the command ends
    quietly, as a Unix tool killed by SIGPIPE does."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        gone = any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real file: not ours to judge
        return False
    if gone:
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
    return gone


def failed(e: Exception, args: argparse.Namespace, debug: bool) -> int:
    """The line and exit code of an error a command ended with. Its classes load here, when
    one is raised: a command that succeeds loads no metrics, tracing or stack module."""
    from plangate.activities.extensions import ExtensionError
    from plangate.dev._stack import StackError
    from plangate.errors import ServiceUnreachable
    from plangate.worker.metrics import MetricsError
    from plangate.worker.tracing import TracingUnavailable
    from plangate.world.policies import PoliciesUnusable

    if isinstance(e, PoliciesUnusable):  # each problem at FILE:LINE:COLUMN, a line each
        for line in e.lines():
            print(visible(f"plangate: {line}"), file=sys.stderr)
        return EXIT_USAGE
    if isinstance(e, PlanError):
        _print_problems(args, e.problems)
        return EXIT_USAGE
    if isinstance(e, UsageError | ExtensionError | TracingUnavailable):
        print(visible(f"plangate: {e}"), file=sys.stderr)
        return EXIT_USAGE
    if isinstance(e, ServiceUnreachable | MetricsError):
        print(visible(f"plangate: {e}"), file=sys.stderr)
    elif isinstance(e, StackError):  # demo and dev: the embedded stack not installed or not up
        print(visible(f"plangate {args.command}: {e}"), file=sys.stderr)
    else:
        hint = "" if debug else " (--debug shows the traceback)"
        print(visible(f"plangate: {type(e).__name__}: {_one_line(e)}{hint}"), file=sys.stderr)
    if debug:
        traceback.print_exception(e)
    return EXIT_NOT_SUCCEEDED


def leave(code: int) -> NoReturn:
    """Flush stdout and stderr, then end the process with ``code`` at once: no interpreter
    teardown, so no native thread of the Temporal client can crash it on the way out. Spans
    still pending are exported first (``plangate.worker.tracing``)."""
    from plangate.worker import tracing

    with contextlib.suppress(Exception):
        tracing.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)

