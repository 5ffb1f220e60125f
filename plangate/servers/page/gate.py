"""Who may log in to the page: the people whose keys it holds, each by their login token
(compared in constant time), and how often an address may try (``Throttle``)."""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from plangate.records.signing import SigningKey


class Gate:
    """The login tokens of the people the page serves."""

    def __init__(self, keys: Sequence[SigningKey]) -> None:
        self._tokens = [(k.name, k.login_token().encode()) for k in keys]

    def who(self, given: str) -> str | None:
        """The person whose login token this is, or None (every token compared)."""
        found = None
        for name, token in self._tokens:
            if hmac.compare_digest(given.encode(), token):
                found = name
        return found


@dataclass
class Throttle:
    """Wrong tokens, counted per client address. The first ``free`` cost nothing; from then on
    each try waits ``first_s`` after the latest failure, doubled with every further failure (at
    most ``max_s``), and a try within the wait is refused unheard (429), the right token
    included, so a locked-out guesser learns nothing. A right token heard clears the count.
    Addresses behind one proxy share a count."""

    free: int = 5
    first_s: float = 1.0
    max_s: float = 600.0
    clock: Callable[[], float] = time.monotonic
    most_addresses: int = 10_000  # a flood of addresses forgets the oldest, never grows memory
    _failures: dict[str, tuple[int, float]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def wait_s(self, who: str) -> float:
        """How long ``who`` must wait before a token is heard again (0: now)."""
        with self._lock:
            count, last = self._failures.get(who, (0, 0.0))
            if count < self.free:
                return 0.0
            delay = min(self.max_s, self.first_s * 2.0 ** min(count - self.free, 40))
            return max(0.0, last + delay - self.clock())

    def failed(self, who: str) -> None:
        with self._lock:
            count, _ = self._failures.pop(who, (0, 0.0))
            self._failures[who] = (count + 1, self.clock())  # re-inserted: newest last
            while len(self._failures) > self.most_addresses:
                del self._failures[next(iter(self._failures))]

    def passed(self, who: str) -> None:
        with self._lock:
            self._failures.pop(who, None)
