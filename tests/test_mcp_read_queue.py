"""The queue a read over MCP goes to is asked off the read's path (issue 50): known, the read
goes there at once and the queue is asked again behind it once ``QUEUE_FOR_S`` old (one
asking at a time); never asked, or ``QUEUE_STALE_S`` old, it is asked before the read. The
DescribeTaskQueue calls are counted on the real Temporal dev server's client."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import Client

from plangate.client.checked import check
from plangate.mcp.access import Access
from plangate.mcp.clients import McpClient, StartLimit
from plangate.mcp.reads import QUEUE_FOR_S, QUEUE_STALE_S, FastReads
from plangate.world.settings import Settings

BOUND_S = 10.0  # far beyond an answered DescribeTaskQueue; a read held by one never returns


async def test_a_known_queue_is_asked_again_behind_the_read(
    client: Client, settings: Settings
) -> None:
    now = [0.0]
    access = Access(settings, StartLimit(0))
    reads = FastReads(access, 2.0, clock=lambda: now[0])
    api = await access.api(McpClient("queue"))
    service = api.client.workflow_service
    real = service.describe_task_queue
    opened = asyncio.Event()
    opened.set()
    answered = asyncio.Event()
    asked: list[str] = []

    async def describe(*a: Any, **kw: Any) -> Any:
        asked.append("asked")
        await opened.wait()
        answer = await real(*a, **kw)
        asked[asked.index("asked")] = "answered"
        answered.set()
        return answer

    service.describe_task_queue = describe  # type: ignore[method-assign]  # counted, then real
    done = check({"goal": "read", "budget": {"replans_max": 0}, "steps": [
        {"n": 1, "tool": "s3.get", "effect": "read",
         "args": {"bucket": "queue-test", "key": "k", "dest": "d.txt"}}]}, settings)

    async def queue() -> str:
        return await asyncio.wait_for(reads.queue(api, done), BOUND_S)

    first = await queue()  # never asked: asked before the read
    per_ask = len(asked)  # one DescribeTaskQueue a queue kind
    assert per_ask >= 1 and set(asked) == {"answered"}
    now[0] = QUEUE_FOR_S - 1
    assert await queue() == first and len(asked) == per_ask
    # known and old: the read goes at once, though Temporal has not answered the asking yet
    opened.clear()
    now[0] = QUEUE_FOR_S + 1
    assert await queue() == first and await queue() == first
    assert asked[per_ask:] == ["asked"]  # asked behind the read, once
    answered.clear()
    opened.set()
    await asyncio.wait_for(answered.wait(), BOUND_S)
    now[0] = 2 * QUEUE_FOR_S  # answered at QUEUE_FOR_S + 1: fresh again
    assert await queue() == first and len(asked) == 2 * per_ask
    now[0] = QUEUE_FOR_S + 1 + QUEUE_STALE_S  # stale: asked before the read
    assert await queue() == first
    assert asked == ["answered"] * 3 * per_ask
