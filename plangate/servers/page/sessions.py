"""Sessions held by the page process: a random id (the cookie) names a person, the CSRF token
of their forms and when it ends. Nothing in the cookie means anything by itself: an id not
in the store (forged, from an earlier process, ended or expired) is nobody's."""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Session:
    id: str
    name: str
    csrf: str  # the token each of this session's forms carries
    ends: float  # on the store's clock

    def csrf_matches(self, given: str) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.csrf.encode())


@dataclass
class Sessions:
    """The open sessions; each lasts ``ttl_s`` from its login."""

    ttl_s: float
    clock: Callable[[], float] = time.monotonic
    most: int = 10_000  # a flood of logins drops the oldest, never grows memory
    _open: dict[str, Session] = field(default_factory=dict, repr=False)

    def start(self, name: str) -> Session:
        s = Session(secrets.token_urlsafe(32), name, secrets.token_urlsafe(32),
                    self.clock() + self.ttl_s)
        self._open[s.id] = s
        while len(self._open) > self.most:
            del self._open[next(iter(self._open))]
        return s

    def find(self, sid: str | None) -> tuple[Session | None, bool]:
        """The session ``sid`` names, and whether it named one that has expired (dropped)."""
        s = self._open.get(sid) if sid else None
        if s is None:
            return None, False
        if self.clock() >= s.ends:
            del self._open[s.id]
            return None, True
        return s, False

    def end(self, sid: str) -> None:
        self._open.pop(sid, None)
