"""The delivery loop of ``plangate ui``: every ``every_s`` it reads the runs index's runs awaiting
approval (``world.run_index.waiting``, one query), and sends each card that has not expired to
each channel, once: a notice is claimed in ``plangate.deliveries`` first (two page processes
never both send it), then sent, and its outcome recorded; a failed attempt is tried again after
``first_retry_s``, doubled each time up to ``max_retry_s``, ``most`` attempts in all.

It runs beside the runs, never in them: a notice late or lost delays and fails nothing a run
does. A card is sent only as the index holds it and where it passes the memo's check
(``records.cards.trusted``); the cards of runs the index lacks (a team's guarded workflows, runs
whose row was lost) are not sent until a row holds them (``plangate index rebuild``)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from pydantic import ValidationError

from plangate.client.pending import PendingCard
from plangate.records.cards import CardsMemo, trusted
from plangate.servers.notify import channels, message
from plangate.servers.notify.settings import Notify
from plangate.world import deliveries, run_index
from plangate.world.clients import World
from plangate.world.deliveries import Notice

Send = Callable[[PendingCard, str], Awaitable[None]]  # a card and its link


def _say(line: str) -> None:
    sys.stderr.write(f"plangate ui: {line}\n")
    sys.stderr.flush()


class Deliveries:
    """The loop, for one deployment (its task queue) and the page at ``ui_url``."""

    def __init__(self, world: World, deployment: str, notify: Notify, ui_url: str) -> None:
        self.world, self.deployment, self.notify = world, deployment, notify
        self.ui_url = notify.ui_url or ui_url
        self.senders: dict[str, Send] = {}
        if notify.email is not None:
            self.senders["email"] = self._email
        if notify.webhook is not None:
            self.senders["webhook"] = self._webhook

    async def _email(self, p: PendingCard, link: str) -> None:
        e = self.notify.email
        assert e is not None
        await channels.send_email(e, message.email(p, link, e), self.notify.send_timeout_s)

    async def _webhook(self, p: PendingCard, link: str) -> None:
        url = self.notify.webhook
        assert url is not None
        await channels.post_webhook(url, message.chat(p, link), self.notify.send_timeout_s)

    async def run(self) -> None:
        """Pass after pass until cancelled; a pass that fails (Postgres away) is said in one
        line (the error's kind only) and the next pass tries again."""
        failing = False
        while True:
            try:
                await self.once()
                failing = False
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if not failing:
                    _say(f"notices: the runs index or the deliveries could not be read "
                         f"({type(e).__name__}); trying again every {self.notify.every_s:g} s")
                failing = True
            await asyncio.sleep(self.notify.every_s)

    async def once(self) -> int:
        """One pass: how many notices it sent."""
        now = datetime.now(UTC)
        sent = 0
        # read before the runs: a notice settled between the two is claimed, and found settled
        done = await deliveries.settled(self.world, self.deployment, self.notify.most)
        for w in await run_index.waiting(self.world, self.deployment):
            try:
                memo = CardsMemo(execution=w.execution, goal=w.goal,
                                 cards=run_index.CARDS.validate_json(w.cards))
            except ValidationError:  # not what a worker writes: no card of it is sent
                continue
            for record in trusted(memo, w.workflow_id, w.execution) or ():
                if record.expires_at <= now:
                    continue
                p = PendingCard(run_id=w.workflow_id, goal=w.goal, record=record)
                for channel, send in self.senders.items():
                    if (record.digest, channel) not in done:
                        sent += await self._deliver(p, channel, send)
        return sent

    async def _deliver(self, p: PendingCard, channel: str, send: Send) -> int:
        n = Notice(p.record.digest, channel, self.deployment, p.run_id, p.record.step,
                   p.record.expires_at)
        tried = await deliveries.claim(self.world, n, self.notify.lease_s, self.notify.most)
        if tried is None:
            return 0
        error: str | None = None
        try:
            await send(p, message.card_link(self.ui_url, p))
        except channels.SendFailed as e:
            error = str(e)
        except Exception as e:  # a notice never stops the loop; its kind is recorded
            error = type(e).__name__
        retry_s = min(self.notify.max_retry_s, self.notify.first_retry_s * 2.0 ** min(tried, 30))
        await deliveries.settle(self.world, n, error, retry_s)
        return 1 if error is None else 0
