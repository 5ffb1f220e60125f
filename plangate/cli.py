"""The ``plangate`` command line (DESIGN.md section 7).

Exit codes: 0 only for a succeeded run (or a clean check); 1 for a run that did not succeed or
a service that could not be reached; 2 for a rejected plan or bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from plangate.settings import Settings
from plans.load import PlanError, load_file
from plans.model import Plan
from workflows.report import RunReport, RunStatus

EXIT_OK, EXIT_NOT_SUCCEEDED, EXIT_USAGE = 0, 1, 2


def _print_problems(path: str, problems: list[str]) -> None:
    print(f"plangate: plan {path} rejected:", file=sys.stderr)
    for p in problems:
        print(f"  - {p}", file=sys.stderr)


def _load_checked(path: str, settings: Settings) -> Plan:
    from plangate.checking import check

    return check(load_file(path), settings.workdir)


def _summary(rep: RunReport) -> str:
    lines = [f"run {rep.run_id}: {rep.status.value} (plan version {rep.plan_version})"]
    for s in rep.steps:
        why = f" [{s.answer}: {s.reason}]" if s.answer else ""
        lines.append(f"  v{s.plan_version} step {s.n} {s.tool}: {s.state.value}{why}")
    if rep.failure:
        f = rep.failure
        lines.append(
            f"  failure: step {f.step} {f.tool} {f.code} (retryable: {str(f.retryable).lower()})"
            f" {f.detail}"
        )
    if rep.escalation:
        lines.append(f"  escalation: {rep.escalation}")
    return "\n".join(lines)


def _progress(rep: RunReport) -> None:
    states = " ".join(
        f"{s.n}:{s.state.value}" for s in rep.steps if s.plan_version == rep.plan_version
    )
    print(f"\r\x1b[K{rep.run_id} v{rep.plan_version} {states}", end="", flush=True)


def _exit_for(rep: RunReport) -> int:
    return EXIT_OK if rep.status is RunStatus.SUCCEEDED else EXIT_NOT_SUCCEEDED


async def _cmd_check(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.checking import lint

    plan = _load_checked(args.plan, settings)
    warnings = lint(plan)
    if warnings and args.strict:
        raise PlanError([f"(strict) {w}" for w in warnings])
    for w in warnings:
        print(f"plangate: warning: {w}", file=sys.stderr)
    print(
        f"plangate: plan {args.plan} is valid"
        + (f" ({len(warnings)} warnings)" if warnings else "")
    )
    return EXIT_OK


async def _cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from plangate import runs
    from plangate.worker_factory import connect

    plan = _load_checked(args.plan, settings)
    client = await connect(settings)
    handle = await runs.start(client, settings, plan, args.id)
    if not args.wait:
        print(handle.id)
        return EXIT_OK
    live = sys.stdout.isatty() and not args.json
    rep = await runs.follow(client, handle.id, _progress if live else None)
    if live:
        print()
    print(rep.model_dump_json(indent=2) if args.json else _summary(rep))
    return _exit_for(rep)


async def _cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from plangate import runs
    from plangate.worker_factory import connect

    rep = await runs.report(await connect(settings), args.id)
    print(rep.model_dump_json(indent=2) if args.json else _summary(rep))
    return _exit_for(rep)


async def _cmd_cancel(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.worker_factory import connect

    client = await connect(settings)
    await client.get_workflow_handle(args.id).cancel()
    print(f"plangate: cancel requested for {args.id}" + (f": {args.reason}" if args.reason else ""))
    return EXIT_OK


async def _cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.worker_factory import build_worker, connect

    worker = await build_worker(await connect(settings), settings)
    print(f"plangate: worker polling {settings.task_queue} on {settings.temporal_address}")
    await worker.run()
    return EXIT_OK


async def _cmd_dev(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.dev import run_dev

    return await run_dev(Path(args.state_dir))


async def _cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.demo import run_demo

    return await run_demo(Path(args.state_dir))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="plangate",
        description="Run agent plans on Temporal, every step guarded by probes of the world.",
        epilog="Exit codes: 0 a succeeded run or a valid plan; 1 a run that did not succeed or "
        "a service that could not be reached; 2 a rejected plan or bad usage.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="validate and lint a plan; starts nothing")
    c.add_argument("plan")
    c.add_argument("--strict", action="store_true", help="treat lint warnings as errors")
    c.set_defaults(fn=_cmd_check)
    r = sub.add_parser("run", help="start a run of a plan")
    r.add_argument("plan")
    r.add_argument("--id", help="the run id (the workflow id); default: generated")
    r.add_argument("--wait", action="store_true", help="follow the run to its end")
    r.add_argument("--json", action="store_true", help="print the run report as JSON")
    r.set_defaults(fn=_cmd_run)
    s = sub.add_parser("status", help="the run report of a run")
    s.add_argument("id")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=_cmd_status)
    k = sub.add_parser("cancel", help="cancel a run")
    k.add_argument("id")
    k.add_argument("--reason", default="", help="printed with the request (not yet stored)")
    k.set_defaults(fn=_cmd_cancel)
    w = sub.add_parser("worker", help="run a worker against the configured services")
    w.set_defaults(fn=_cmd_worker)
    d = sub.add_parser("dev", help="start the embedded stack and a worker in the foreground")
    d.add_argument("--state-dir", default=".plangate/dev")
    d.set_defaults(fn=_cmd_dev)
    m = sub.add_parser("demo", help="replay the seeds' incidents against real services")
    m.add_argument("--state-dir", default=".plangate/demo")
    m.set_defaults(fn=_cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        code: int = asyncio.run(args.fn(args, settings))
        return code
    except PlanError as e:
        _print_problems(getattr(args, "plan", "?"), e.problems)
        return EXIT_USAGE
    except ValueError as e:
        print(f"plangate: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except (OSError, RuntimeError) as e:
        print(f"plangate: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_NOT_SUCCEEDED


if __name__ == "__main__":
    sys.exit(main())
