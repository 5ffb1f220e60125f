"""The commands on a plan before it runs: ``check`` (valid and linted, needs no server) and
``plan`` (the model's first plan toward a goal, written for a person to read)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from plangate.cli.command import EXIT_NOT_SUCCEEDED, EXIT_OK, Command, UsageError
from plangate.plans.load import PlanError
from plangate.plans.problem import Problem
from plangate.plans.visible import visible
from plangate.plans.words import many
from plangate.world.settings import Settings


def _check_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", help="the plan file: JSON (.json) or YAML")
    p.add_argument("--strict", action="store_true", help="treat lint warnings as errors")


async def _check(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.client.checked import check

    checked = check(Path(args.plan), settings, strict=args.strict)
    for w in checked.warnings:
        print(visible(f"plangate: warning: {w}"), file=sys.stderr)
    n = len(checked.warnings)
    said = f" ({many(n, 'warning')})" if n else ""
    print(visible(f"plangate: plan {args.plan} is valid{said}"))
    return EXIT_OK


CHECK = Command(
    "check", help="validate and lint a plan; starts nothing",
    description="Validate and lint a plan file against this deployment's catalogue: every "
                "problem, each naming its step and field. Starts nothing and needs no server.",
    run=_check, arguments=_check_arguments, connects=False,
)


def _plan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("goal", help="what the plan is for, in a sentence")
    p.add_argument("--context", metavar="FILE", help="notes for the model (names, amounts)")
    p.add_argument("-o", "--output", metavar="PLAN",
                   help="write the plan here: JSON for a .json file, else YAML with the "
                   "findings as comments")


def _read_context(path: Path, limit: int) -> str:
    try:
        if path.stat().st_size > limit:
            raise UsageError(f"context {path}: over {limit:,} bytes")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"context {path}: cannot read it as text: {e}") from None


async def _plan(args: argparse.Namespace, settings: Settings) -> int:
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


PLAN = Command(
    "plan", help="ask the model for a first plan toward a goal, checked and linted; runs nothing",
    description="Ask the configured model for a first plan toward a goal over the catalogue, "
                "checked and linted, and write it for a person to read. Runs nothing.",
    run=_plan, arguments=_plan_arguments,
)
