"""The team's worker, guarded by plangate (its own client, workflows and activities, and one
plugin with the guard table).

    python run_worker.py --queue credits [--guards guards.yaml] [--principal support-agent]

Temporal's connection comes from the environment as for any Temporal SDK (``TEMPORAL_ADDRESS``,
``TEMPORAL_NAMESPACE``, a profile); plangate's deployment settings too (``PLANGATE_*``: its
Postgres, S3, approvers and policies), read by the plugin. The team's own world is
``TEAM_DATABASE_URL`` (its Postgres) and ``TEAM_S3_ENDPOINT_URL`` (its S3): one that is not set,
or a Temporal server that does not answer, is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import NoReturn

from credits.activities import (
    WORLD_VARS,
    archive_object,
    count_rows,
    ensure_schema,
    find_credit,
    issue_credit,
    load_export,
)
from credits.workflows import ArchiveWorkflow, CountWorkflow, CreditWorkflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfig
from temporalio.worker import Worker

from plangate import PlangateError
from plangate.temporal import PlangatePlugin

HERE = Path(__file__).resolve().parent


async def main() -> None:
    parser = argparse.ArgumentParser(description="The team's worker, guarded by plangate.")
    parser.add_argument("--queue", required=True, help="the task queue to poll")
    parser.add_argument("--guards", default=str(HERE / "guards.yaml"), help="the guard table")
    parser.add_argument("--principal", default="support-agent",
                        help="whom this worker's guarded calls act as")
    args = parser.parse_args()
    for name, what in WORLD_VARS.items():  # before anything reads them
        if not os.environ.get(name):
            _stop(f"{name} is not set: {what}; under plangate dev, export "
                  "TEAM_DATABASE_URL=$PLANGATE_DATABASE_URL "
                  "TEAM_S3_ENDPOINT_URL=$PLANGATE_S3_ENDPOINT_URL")
    try:  # the guard table and plangate's settings first: a bad one stops the worker, named
        guard = PlangatePlugin(args.guards, principal=args.principal)
    except PlangateError as e:
        _stop(str(e))

    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "localhost:7233")
    try:
        client = await Client.connect(**config, data_converter=pydantic_data_converter)
    except RuntimeError as e:  # the SDK's connection error; its text names the address
        _stop(f"no Temporal server answers at {config['target_host']} (TEMPORAL_ADDRESS): "
              f"{' '.join(str(e).split())}")
    await ensure_schema()

    try:  # the plugin checks the table against what this worker runs: a gap is named
        worker = Worker(
            client,
            task_queue=args.queue,
            workflows=[CreditWorkflow, ArchiveWorkflow, CountWorkflow],
            activities=[issue_credit, find_credit, load_export, archive_object, count_rows],
            plugins=[guard],
        )
    except PlangateError as e:
        _stop(str(e))
    print(f"team worker polling {args.queue}", flush=True)
    await worker.run()


def _stop(message: str) -> NoReturn:
    print(f"run_worker: {message}", file=sys.stderr, flush=True)
    # no interpreter teardown: after a failed connect, the Temporal client's native threads can
    # crash it on the way out (Fatal Python error: PyGILState_Release; sdk-python issue 300)
    os._exit(2)


if __name__ == "__main__":
    asyncio.run(main())
