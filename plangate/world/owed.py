"""Writes plangate owes its own Postgres (issue 47): bookkeeping that did not go in when it was
made (a run's windows row, a call's outcome in the effect ledger) because Postgres was away.

Bookkeeping may delay a run, never fail it nor change what it reports: the worker that could
not write a row hands it here and goes on; one background task per worker writes what is owed,
oldest first, when Postgres answers again (0.5 s between tries, doubling, at most 30 s). The
rows are kept in the worker's memory, at most ``OWED_MAX``; a worker that dies or stops owing
rows loses them, and says how many. Each reader copes with a row that never came: the report
reads such a run from Temporal's visibility and says so; a call's key left ``intent`` is read
back the next time it comes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import psycopg
from psycopg_pool import PoolTimeout

from plangate.world.clients import World

log = logging.getLogger(__name__)

OWED_MAX = 10_000
RETRY_S = (0.5, 30.0)
CLOSE_TRY_S = 5.0  # a worker that stops owing writes tries this long more
PAY_TRY_S = 30.0  # a write that hangs longer (a connection that never answers) is tried again
# what a Postgres that is away raises; anything else is a row that will never go in
AWAY: tuple[type[BaseException], ...] = (
    psycopg.OperationalError, PoolTimeout, OSError, TimeoutError,
    psycopg.errors.IdleInTransactionSessionTimeout,
)


@dataclass(frozen=True)
class Debt:
    what: str  # for the log: "the windows of RUN", "the outcome of KEY"
    write: Callable[[], Awaitable[object]]


class Owed:
    """The worker's debts to its Postgres, paid by one background task while any are owed."""

    def __init__(self) -> None:
        self.debts: deque[Debt] = deque(maxlen=OWED_MAX)
        self.paid = 0
        self.dropped = 0
        self._task: asyncio.Task[None] | None = None

    def owe(self, what: str, write: Callable[[], Awaitable[object]]) -> None:
        if len(self.debts) == self.debts.maxlen:
            self.dropped += 1
            log.warning("more than %d writes owed to Postgres: the oldest (%s) is dropped",
                        OWED_MAX, self.debts[0].what)
        self.debts.append(Debt(what, write))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._pay())

    async def _pay(self) -> None:
        wait = RETRY_S[0]
        while self.debts:
            debt = self.debts[0]
            try:
                await asyncio.wait_for(debt.write(), PAY_TRY_S)
            except AWAY as e:
                log.info("%d writes owed to Postgres, not written yet: %s", len(self.debts), e)
                await asyncio.sleep(wait)
                wait = min(RETRY_S[1], wait * 2)
                continue
            except Exception:
                log.exception("%s could not be written", debt.what)
            else:
                self.paid += 1
            wait = RETRY_S[0]
            if self.debts and self.debts[0] is debt:
                self.debts.popleft()

    async def settled(self, within_s: float) -> bool:
        """Wait up to ``within_s`` for every debt to be paid; whether it was."""
        if self._task is not None and not self._task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), within_s)
        return not self.debts

    async def aclose(self) -> None:
        """With the worker's world: what is owed is tried once more (``CLOSE_TRY_S``), then
        given up, and counted in the log."""
        if self.debts and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._pay())
        await self.settled(CLOSE_TRY_S)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.debts:
            log.warning("%d writes owed to Postgres were never made (it did not answer), the "
                        "first: %s", len(self.debts), self.debts[0].what)


def owed(world: World) -> Owed:
    """The world's debts (one per worker: its world's)."""
    return world.client("plangate.owed", Owed)


async def written(world: World, what: str, write: Callable[[], Awaitable[object]],
                  try_s: float, later: Callable[[], Awaitable[object]] | None = None) -> bool:
    """``write`` once, within ``try_s``; where Postgres is away, owed (False): ``later``
    where the row written late differs (None: ``write`` again). A try that
    runs out of time is cancelled without being waited for: on a connection that hangs,
    psycopg's cancel waits for an answer of its own, past any bookkeeping's patience."""
    trying = asyncio.ensure_future(write())
    done, _ = await asyncio.wait({trying}, timeout=try_s)
    if trying in done:
        try:
            trying.result()
            return True
        except AWAY as e:
            why: BaseException = e
    else:
        trying.cancel()
        trying.add_done_callback(_quiet)
        why = TimeoutError(f"no answer within {try_s:g} s")
    log.warning("%s is owed until Postgres answers: %s", what, why)
    owed(world).owe(what, later or write)
    return False


def _quiet(t: asyncio.Future[object]) -> None:
    if not t.cancelled():
        t.exception()  # retrieved: an abandoned try's error is the debt's, logged there
