"""The team's worker for the refund graph, guarded by plangate: LangGraph's plugin (its graph's
nodes as activities) and plangate's (the guard table), plangate's last.

    python refund_worker.py --queue refunds [--guards guards.yaml] [--principal support-agent]

Temporal's connection comes from the environment as for any Temporal SDK (``TEMPORAL_ADDRESS``,
``TEMPORAL_NAMESPACE``, a profile); plangate's deployment settings too (``PLANGATE_*``), read by
its plugin; the model's (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``TEAM_MODEL``) by the graph's
``agent`` activity. The team's own Postgres is ``TEAM_DATABASE_URL``: unset, or a Temporal server
that does not answer, is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import NoReturn

from refunds import graph
from refunds.activities import WORLD_VAR, ensure_schema, find_refund, issue_refund
from refunds.workflows import RefundAgentWorkflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfig
from temporalio.langgraph import LangGraphPlugin
from temporalio.worker import Worker

from plangate import PlangateError
from plangate.temporal import PlangatePlugin

HERE = Path(__file__).resolve().parent


async def main() -> None:
    parser = argparse.ArgumentParser(description="The refund graph's worker, guarded.")
    parser.add_argument("--queue", required=True, help="the task queue to poll")
    parser.add_argument("--guards", default=str(HERE / "guards.yaml"), help="the guard table")
    parser.add_argument("--principal", default="support-agent",
                        help="whom this worker's guarded calls act as")
    args = parser.parse_args()
    if not os.environ.get(WORLD_VAR):
        _stop(f"{WORLD_VAR} is not set: the team's own Postgres (a libpq URL); under "
              f"plangate dev, export {WORLD_VAR}=$PLANGATE_DATABASE_URL")
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

    worker = Worker(
        client, task_queue=args.queue, workflows=[RefundAgentWorkflow],
        activities=[issue_refund, find_refund],
        plugins=[LangGraphPlugin(graphs={graph.NAME: graph.build()}), guard],
    )
    print(f"refund graph worker polling {args.queue}", flush=True)
    await worker.run()


def _stop(message: str) -> NoReturn:
    print(f"refund_worker: {message}", file=sys.stderr, flush=True)
    # no interpreter teardown: after a failed connect, the Temporal client's native threads can
    # crash it on the way out (Fatal Python error: PyGILState_Release; sdk-python issue 300)
    os._exit(2)


if __name__ == "__main__":
    asyncio.run(main())
