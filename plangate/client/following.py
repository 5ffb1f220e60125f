"""Following a run: its report as it changes, until it ends, and the card it waits on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from plangate.client import reports, unbegun
from plangate.client.errors import RunEnded, UnknownRun
from plangate.client.handles import description, handle
from plangate.records.approvals import ApprovalRecord, CardStatus
from plangate.records.interface import REPORT_QUERY
from plangate.records.report import RunReport
from plangate.world.settings import Settings


async def poll(
    client: Client, settings: Settings, run_id: str, every_s: float
) -> AsyncGenerator[RunReport, None]:
    await description(client, run_id)  # an unknown run: UnknownRun, at once
    final = asyncio.ensure_future(reports.result(client, settings, run_id))
    queued: RunReport | None = None  # a run not begun is the same until it begins: read once
    try:
        while not final.done():
            rep: RunReport | None
            try:
                rep = await handle(client, run_id).query(REPORT_QUERY, result_type=RunReport)
            except RPCError as e:  # not begun yet (queued), or no worker answered
                if e.status == RPCStatusCode.FAILED_PRECONDITION and queued is None:
                    queued = await _unbegun_or_none(client, settings, run_id)
                rep = queued if e.status == RPCStatusCode.FAILED_PRECONDITION else None
            if rep is not None:
                yield rep
            await asyncio.wait([final], timeout=every_s)
        yield final.result()
    finally:
        final.cancel()


async def _unbegun_or_none(client: Client, settings: Settings, run_id: str) -> RunReport | None:
    try:
        return await unbegun.report(client, settings, run_id)
    except (RPCError, UnknownRun):
        return None


async def watch(
    client: Client, settings: Settings, run_id: str, every_s: float
) -> AsyncIterator[RunReport]:
    seen: Any = None
    async for rep in poll(client, settings, run_id, every_s):
        now = (rep.status, [(s.plan_version, s.n, s.state) for s in rep.steps])
        if now != seen or rep.status.final:
            seen = now
            yield rep


async def wait_for_card(
    client: Client, settings: Settings, run_id: str, step: int | None, timeout_s: float,
    every_s: float,
) -> ApprovalRecord:
    which = "" if step is None else f" of step {step}"

    async def first() -> ApprovalRecord:
        async with aclosing(poll(client, settings, run_id, every_s)) as polled:
            async for rep in polled:
                for a in rep.approvals:
                    pending = a.status is CardStatus.PENDING
                    if pending and a.plan_version == rep.plan_version and (
                        step is None or a.step == step
                    ):
                        return a
                if rep.status.final:
                    raise RunEnded(f"run {run_id!r} ended ({rep.status.value}) with no "
                                   f"card{which} waiting")
        raise RunEnded(f"run {run_id!r} ended with no card waiting")

    try:
        return await asyncio.wait_for(first(), timeout_s)
    except TimeoutError:
        raise TimeoutError(
            f"no card{which} of run {run_id!r} waited within {timeout_s:g} s"
        ) from None
