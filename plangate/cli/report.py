"""What runs did, read back: ``report`` (the staleness report over finished runs, with the
policy decisions where there are policies) and ``ledger`` (every write, external and money call
plangate made)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from plangate.cli.command import EXIT_NOT_SUCCEEDED, EXIT_OK, Command, UsageError
from plangate.plans.visible import visible, visible_json
from plangate.world.settings import Settings


def _report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--since", default="7d", metavar="DURATION",
                   help="runs finished in this long before now: 90 (seconds), 90s, 15m, "
                        "8h, 2d (default 7d)")
    p.add_argument("--all-queues", action="store_true",
                   help="runs on every task queue (default: PLANGATE_TASK_QUEUE's only)")
    p.add_argument("--visibility", action="store_true",
                   help="read every run from Temporal's visibility, none from the windows the "
                        "worker keeps in Postgres (slower; what --all-queues does)")
    p.add_argument("--json", action="store_true", help="print it as JSON")
    p.add_argument("--html", metavar="FILE", help="also write it as an HTML page with charts")


def _write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path``; where it went, as an absolute path."""
    path.write_text(text, encoding="utf-8")
    return path.resolve()


async def _report(args: argparse.Namespace, settings: Settings) -> int:
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
    runs = await _runs(client, settings, since, None if args.visibility else queue, queue)
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


async def _runs(client: Any, settings: Settings, since: datetime, ledger: str | None,
                queue: str | None) -> list[Any]:
    """The finished runs of ``queue``: those the deployment's Postgres holds read there (with
    ``ledger`` the deployment's queue), the rest from visibility; why visibility alone was
    read, on stderr."""
    from plangate.cli.services import check_postgres
    from plangate.client import report_runs
    from plangate.errors import ServiceUnreachable
    from plangate.world.clients import World

    if ledger is None:
        return (await report_runs.gathered(client, None, since, queue)).runs
    try:  # at once, where a pool would wait out its timeout
        await check_postgres(settings.world)
    except ServiceUnreachable as e:
        print(visible(f"plangate: {e.service} at {e.where} could not be reached "
                      f"({e.reason}): every run read from Temporal's visibility"),
              file=sys.stderr)
        return (await report_runs.gathered(client, None, since, queue)).runs
    world = World(settings.world)
    try:
        got = await report_runs.gathered(client, world, since, ledger)
    finally:
        await world.close()
    if got.note is not None:
        print(visible(f"plangate: {got.note}"), file=sys.stderr)
    return got.runs


async def _policy_decisions(settings: Settings, since: datetime) -> list[Any] | None:
    """The policy decisions kept since ``since`` where the deployment has Cedar policies
    (``PLANGATE_POLICIES``); None elsewhere."""
    if settings.policy.policies is None:
        return None
    import psycopg
    from psycopg_pool import PoolTimeout

    from plangate.world import decisions
    from plangate.world.clients import World

    world = World(settings.world)
    try:
        return list(await decisions.listed(world, since))
    except (psycopg.Error, PoolTimeout) as e:  # the runs' report stands without them: said
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        print(visible(f"plangate: the policy decisions in Postgres could not be read "
                      f"({first}): none shown"), file=sys.stderr)
        return None
    finally:
        await world.close()


REPORT = Command(
    "report", help="the staleness report over finished runs: E = W x R x V per tool",
    description="Print the staleness report over finished runs: per tool W, R, V and "
                "E = W x R x V, with the 409/412/403 counts.",
    run=_report, arguments=_report_arguments,
)


def _ledger_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", metavar="RUN", help="a run id (its workflow id)")
    p.add_argument("--json", action="store_true", help="the rows as a JSON array")
    p.add_argument("--limit", type=int, default=1000, help="at most this many rows (default 1000)")


async def _ledger(args: argparse.Namespace, settings: Settings) -> int:
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
        amount = f" amount {r.amount}" if r.amount is not None else ""  # whole currency units
        who = f" approved by {r.approver}" if r.approver else ""
        print(visible(
            f"{r.intent_at:%Y-%m-%d %H:%M:%S} {r.state.value:<7} {r.effect:<8} {r.tool}{amount} "
            f"run {r.run_id} v{r.plan_version} step {r.step} attempts {r.attempts}{who} "
            f"key {r.key}"
        ))
    return EXIT_OK


LEDGER = Command(
    "ledger", help="the effect ledger: every write, external and money call plangate made, "
    "newest first (of one run with RUN)",
    description="List the effect ledger: every write, external and money call plangate made "
                "(plangate.effects), its state (intent, done, failed, unknown), run, step and "
                "approver; newest first.",
    run=_ledger, arguments=_ledger_arguments,
)
