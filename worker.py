"""Starts a plangate worker against the configured services (same as `plangate worker`)."""

from __future__ import annotations

import asyncio

from plangate.settings import Settings
from plangate.worker_factory import build_worker, connect


async def main() -> None:
    settings = Settings.from_env()
    worker = await build_worker(await connect(settings), settings)
    print(f"plangate: worker polling {settings.task_queue} on {settings.temporal_address}")
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
