"""``policy check DIR``: the Cedar files validated against plangate's schema (each problem
``FILE:LINE:COLUMN: message``, exit 2), else the bundle and every policy's id; ``policy explain
PLAN``: the decision for each step as written, and the policies that made it. Neither needs a
server."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from plangate.cli.command import EXIT_OK, EXIT_USAGE, Command
from plangate.plans.visible import visible
from plangate.world.settings import PolicySettings, Settings

if TYPE_CHECKING:
    from plangate.plans.catalogue import Catalogue
    from plangate.world.policies import Bundle


def _bundle(settings: Settings, directory: str | None
            ) -> tuple[Bundle, Catalogue, PolicySettings] | None:
    """The policies of ``directory`` (None: the deployment's) and the catalogue they were
    validated against; None, their problems printed, when they do not validate."""
    from dataclasses import replace

    from plangate.activities.catalogue import catalogue
    from plangate.world.policies import PoliciesUnusable, load_bundle

    policy = settings.policy
    if directory is not None:
        policy = replace(policy, policies=Path(directory))
    cat = catalogue(settings.catalogue)
    try:
        return load_bundle(policy, settings.world.scope, cat), cat, policy
    except PoliciesUnusable as e:
        for line in e.lines():
            print(visible(line), file=sys.stderr)
        return None


def _where(policy: PolicySettings) -> str:
    return str(policy.policies) if policy.policies else "built-in policies only"


def _check_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="a directory of *.cedar policy files")


async def _check(args: argparse.Namespace, settings: Settings) -> int:
    loaded = _bundle(settings, args.dir)
    if loaded is None:
        return EXIT_USAGE
    bundle, _, policy = loaded
    where = _where(policy)
    print(visible(f"plangate: policies in {where} are valid: bundle {bundle.bundle} "
                  f"({bundle.mode})"))
    width = max(len(i) for i in bundle.ids)
    for pid, p in bundle.policies.items():
        place = ("built-in" if pid.startswith("plangate:")
                 else f"{Path(where) / p.file}:{p.line}:{p.column}")
        print(visible(f"  {pid:<{width}}  {place}"))
    return EXIT_OK


def _explain_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", metavar="PLAN", help="the plan file: JSON (.json) or YAML")
    p.add_argument("--policies", metavar="DIR",
                   help="the policies to decide with (default: PLANGATE_POLICIES)")


async def _explain(args: argparse.Namespace, settings: Settings) -> int:
    import json
    from dataclasses import replace
    from datetime import UTC

    from plangate.activities.policing import call_request
    from plangate.client.checked import check
    from plangate.world.policies.schema import unbound

    loaded = _bundle(settings, args.policies)
    if loaded is None:
        return EXIT_USAGE
    bundle, cat, policy = loaded
    # checked as plangate check checks it, but for the policies: a forbidden step is what is
    # explained here, not a reason to explain nothing
    unruled = replace(settings, policy=replace(settings.policy, policies=None))
    plan = check(Path(args.plan), unruled).plan
    now = datetime.now(UTC)
    print(visible(f"plangate: bundle {bundle.bundle} ({_where(policy)}; {bundle.mode}), "
                  f"decided at {now.isoformat(timespec='seconds')} with no approvals and no "
                  "totals"))
    for step in plan.steps:
        info = cat.tools.get(step.tool)
        effect = cat.effect_of(step.tool, step.effect)
        args_ = dict(step.args)
        request = call_request(
            step.tool, info, effect, args_, plan.on_behalf_of, now=now,
            approval_asked=step.approval == "required" or bool(info and info.approval),
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


POLICY = Command(
    "policy", help="check a directory of Cedar policies; explain a plan's decisions",
    description="Check a directory of Cedar policies against plangate's schema, or explain the "
                "decision the deployment's policies make about each step of a plan.",
    subcommands=(
        Command("check", help="validate the *.cedar files of DIR against plangate's schema: "
                "each problem as FILE:LINE:COLUMN: message (exit 2), else the bundle and the "
                "policies' ids",
                description="Validate every *.cedar file of DIR against plangate's schema: "
                            "each problem as FILE:LINE:COLUMN: message (exit 2); else print "
                            "the bundle's digest and each policy's id and place (exit 0).",
                run=_check, arguments=_check_arguments,
                connects=False),
        Command("explain", help="the decision for each step of a plan as written, and the "
                "policies that made it; starts nothing",
                description="Decide each step of a plan as written (arguments bound only when "
                            "it runs are said so) with the deployment's policies or --policies "
                            "DIR, naming the policies that decided; starts nothing, needs no "
                            "server.",
                run=_explain, arguments=_explain_arguments, connects=False),
    ),
)
