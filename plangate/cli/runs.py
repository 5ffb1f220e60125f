"""The commands on runs: ``run`` (start one, or queue it), ``watch`` (follow one to its end),
``status`` (its report), ``runs`` (the listing) and ``cancel``."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from plangate.cli.command import (
    EXIT_NOT_SUCCEEDED,
    EXIT_OK,
    Command,
    UsageError,
    api,
    exit_for,
    index_world,
)
from plangate.plans.visible import visible, visible_json
from plangate.records.report import RunStatus
from plangate.world.settings import Settings, parse_duration

if TYPE_CHECKING:
    from plangate.client.api import Plangate


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", help="the plan file: JSON (.json) or YAML")
    p.add_argument("--id", help="the run id (the workflow id); default: generated")
    p.add_argument("--wait", action="store_true", help="follow the run to its end (as watch)")
    p.add_argument("--json", action="store_true", help="print the run report as JSON")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--start-at", metavar="TIME", help="queue the run to start at this "
                      "ISO-8601 time (with a time zone)")
    when.add_argument("--start-in", metavar="DURATION", help="queue the run to start after "
                      "this delay: 90 (seconds), 90s, 15m, 8h, 2d")


def _when(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--start-at: {text!r} is not an ISO-8601 time") from None
    if when.tzinfo is None:
        raise UsageError(f"--start-at: {text!r} has no time zone (add Z or +01:00)")
    return when


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.api import RunIdInUse
    from plangate.client.checked import check

    plan = check(Path(args.plan), settings)  # once, before connecting: needs no server
    start_at = _when(args.start_at) if args.start_at else None
    start_in = (
        timedelta(seconds=parse_duration(args.start_in, "--start-in")) if args.start_in else None
    )
    plangate = await api(settings)
    try:
        run_id = await plangate.start(plan, run_id=args.id, start_at=start_at, start_in=start_in)
    except RunIdInUse as e:
        raise UsageError(f"{e}; choose another --id") from None
    except ValueError as e:  # a start time in the past, a delay too long
        raise UsageError(str(e)) from None
    if not args.wait:
        print(visible(run_id))
        return EXIT_OK
    args.following = run_id  # Ctrl-C from here on stops the following, never the run
    return await _follow(plangate, run_id, args.json)


RUN = Command(
    "run", help="start a run of a plan",
    description="Check a plan and start a run of it (or queue it with --start-at/--start-in), "
                "printing its id; --wait follows it to its end as watch does.",
    run=_run, arguments=_run_arguments,
)


async def _follow(plangate: Plangate, run_id: str, as_json: bool) -> int:
    """Follow a run to its end: with ``--json`` its final report alone; else a live table on
    a terminal, plain lines and the summary elsewhere (``plangate.client.view``). The run's code."""
    from plangate.client.view import follow

    if as_json:
        rep = await plangate.result(run_id)
        print(visible_json(rep.model_dump_json(indent=2)))
    else:
        rep = await follow(plangate, run_id, sys.stdout)
    return exit_for(rep)


def _watch_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="the run id (its workflow id), as run and runs print it")
    p.add_argument("--json", action="store_true", help="print only the final run report")


async def _watch(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.api import UnknownRun

    plangate = await api(settings)
    args.following = args.id
    try:
        return await _follow(plangate, args.id, args.json)
    except UnknownRun as e:
        raise UsageError(f"{e} on {settings.temporal.address}") from None


WATCH = Command(
    "watch",
    help="follow a run to its end: a live table on a terminal, a line per change elsewhere",
    description="Follow a run to its end: a live table on a terminal, a line per change "
                "elsewhere; --json prints only the final report.",
    run=_watch, arguments=_watch_arguments,
)


def _status_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="the run id (its workflow id), as run and runs print it")
    p.add_argument("--json", action="store_true", help="print the run report as JSON")


async def _status(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.api import NoWorkerAnswered, UnknownRun
    from plangate.client.view import summary

    plangate = await api(settings)
    try:
        rep = await plangate.report(args.id)
    except UnknownRun as e:
        raise UsageError(f"{e} on {settings.temporal.address}") from None
    except NoWorkerAnswered as e:
        print(visible(f"plangate: {e}"), file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    print(visible_json(rep.model_dump_json(indent=2)) if args.json else summary(rep))
    return exit_for(rep)


STATUS = Command(
    "status", help="the run report of a run",
    description="Print the run report of a queued, running or ended run: each step, each card "
                "with the commands that answer it, the failure.",
    run=_status, arguments=_status_arguments,
)


def _runs_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--status", choices=[s.value for s in RunStatus],
                   help="only runs in this status (needs plangate's search attributes)")
    p.add_argument("--limit", type=int, default=100, help="at most this many runs (default 100)")
    p.add_argument("--json", action="store_true", help="print the runs as a JSON array")


async def _runs(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from plangate.client.api import SearchAttributesMissing

    status = RunStatus(args.status) if args.status else None
    plangate = await api(settings)
    plangate.index = await index_world(settings)
    try:
        listing = await plangate.runs_listing(status, limit=args.limit)
    except SearchAttributesMissing as e:
        print(visible(f"plangate: {e}"), file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    finally:
        if plangate.index is not None:
            await plangate.index.close()
    runs = listing.runs
    if listing.note is not None:  # said on stderr: stdout stays the listing (JSON with --json)
        print(visible(f"plangate: {listing.note}: every run listed from Temporal's "
                      "visibility"), file=sys.stderr)
    if args.json:
        print(visible_json(json.dumps([
            {"run_id": r.run_id, "status": r.status, "goal": r.goal,
             "started_at": r.started_at.isoformat(),
             "closed_at": r.closed_at.isoformat() if r.closed_at else None}
            for r in runs
        ], indent=2)))
        return EXIT_OK
    width = max((len(visible(r.run_id)) for r in runs), default=6)
    for r in runs:
        started = r.started_at.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        run_id, status_shown = visible(r.run_id), visible(r.status)
        print(f"{run_id:<{width}}  {status_shown:<17}  {started}  {visible(r.goal)}")
    if not runs:
        print(visible(f"plangate: no runs{f' {status.value}' if status else ''} on task queue "
                      f"{settings.temporal.task_queue}"), file=sys.stderr)
    return EXIT_OK


RUNS = Command(
    "runs", help="the runs on the task queue, newest first, from the runs index or visibility",
    description="List the runs on the task queue, newest first (id, status, start time, goal), "
                "from plangate's runs index where it holds as many runs as Temporal's "
                "visibility counts, else through visibility (said on stderr).",
    run=_runs, arguments=_runs_arguments,
)


def whoami() -> str:
    """The login name (a cancel's or a revoke's recorded requester by default); empty if none."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def _cancel_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="the run id (its workflow id), as run and runs print it")
    p.add_argument("--reason", default="", help="why: recorded in the run's report")
    p.add_argument("--as", dest="requester", default=whoami(), metavar="NAME",
                   help="who asks (default: the user running the command)")


async def _cancel(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.api import RunEnded, UnknownRun

    plangate = await api(settings)
    try:
        await plangate.cancel(args.id, reason=args.reason, requester=args.requester)
    except UnknownRun as e:
        raise UsageError(f"{e} on {settings.temporal.address}") from None
    except RunEnded as e:
        raise UsageError(str(e)) from None
    print(visible(f"plangate: cancel requested for {args.id}"
                  + (f": {args.reason}" if args.reason else "")))
    return EXIT_OK


CANCEL = Command(
    "cancel", help="cancel a run",
    description="Cancel a run by signal: no step is dispatched after it; the reason and who "
                "asked are in its report.",
    run=_cancel, arguments=_cancel_arguments,
)
