"""The commands on an embedded stack (Temporal, Postgres, S3 on this machine, from the
``embedded`` extra): ``dev`` (the stack and a worker in the foreground) and ``demo`` (two
incidents replayed on it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from plangate.cli.command import Command
from plangate.world.settings import Settings


def _dev_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", default=".plangate/dev", metavar="DIR",
                   help="where the services keep their data between starts "
                        "(default .plangate/dev)")
    p.add_argument("--free-ports", action="store_true",
                   help="every service on a port the system picks, rather than 7233, 8233, "
                        "5433, 9000 and 9464 (each of which falls back to a free one if taken)")


async def _dev(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.dev.run import run_dev

    if args.free_ports:
        return await run_dev(
            Path(args.state_dir), temporal_port=None, ui_port=None, postgres_port=None,
            s3_port=None, metrics_port=None,
        )
    return await run_dev(Path(args.state_dir))


DEV = Command(
    "dev", help="start the embedded stack and a worker in the foreground",
    description="Start the embedded stack (Temporal, Postgres, S3) and a worker in the "
                "foreground, printing the export lines that point at them.",
    run=_dev, arguments=_dev_arguments,
)


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", default=".plangate/demo", metavar="DIR",
                   help="where the demo's services keep their files while it runs "
                        "(default .plangate/demo)")


async def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from plangate.demo.replay import run_demo

    return await run_demo(Path(args.state_dir))


DEMO = Command(
    "demo", help="replay two incidents of agent plans against real services",
    description="Replay two incidents of agent plans against real services on an embedded "
                "stack, each by a naive executor and by plangate.",
    run=_demo, arguments=_demo_arguments,
)
