"""Decisions a worker's guards made, found again at the call when nothing they read changed.

A decision is a pure function of its bundle and its request (``engine.decide``). Where a
bundle's policies read none of what changes between the guards and the call (the time, what
the check at the call observed, the running totals: ``Bundle.reads``), the call's request is
compared with the guards' field by field, canonically (``now`` aside, which no policy reads):
the same request is the same decision, and the call takes it instead of asking Cedar again.
Anything else (another submitter, approvals, bound arguments, another effect) is another
request, decided again. Each bundle keeps its own (a change of bundle remembers nothing), a
bounded number on this worker, in memory: a call on another worker decides itself.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from plangate.plans.limits import canonical_json
from plangate.records.policy import Decision, PolicyRequest

# what a policy may read that is not the same at the guards and at the call
CHANGING = frozenset({"now", "observed", "totals"})
SIZE = 8192  # decisions kept per bundle (a 31-step plan version keeps 31)


def request_key(r: PolicyRequest) -> bytes | None:
    """SHA-256 of the request as canonical JSON, ``now`` left out; None where it has none
    (a value JSON cannot hold): such a request is decided each time."""
    try:
        return hashlib.sha256(canonical_json(r.model_dump(mode="json", exclude={"now"})))\
            .digest()
    except ValueError:
        return None


class Recall:
    """One bundle's remembered decisions, by request (``request_key``), the newest kept."""

    def __init__(self, size: int = SIZE) -> None:
        self._size = size
        self._kept: OrderedDict[bytes, Decision] = OrderedDict()
        self._lock = threading.Lock()  # the guards decide in a thread, the call in the loop

    def __len__(self) -> int:
        return len(self._kept)

    def put(self, r: PolicyRequest, d: Decision) -> None:
        key = request_key(r)
        if key is None:
            return
        with self._lock:
            self._kept[key] = d
            self._kept.move_to_end(key)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)

    def get(self, r: PolicyRequest) -> Decision | None:
        """The decision remembered for this very request, as made at ``r.now`` (the same:
        no policy of the bundle reads the time); None where none is."""
        key = request_key(r)
        if key is None:
            return None
        with self._lock:
            d = self._kept.get(key)
        return None if d is None else d.model_copy(update={"decided_at": r.now})
