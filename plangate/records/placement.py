"""Which workers may take a run: a task queue per catalogue, announced in a poller's identity.

A worker polls ``catalogue_queue(deployment queue, digest)``, ``plangate@3f9c1a2b``: the
deployment's queue (``PLANGATE_TASK_QUEUE``), ``@``, a digest of the names of its tools and
probes. Workers with the same catalogue share that queue; a worker without a tool never sees a
task of a run that uses it, since a run's activities, its re-planner's child and the run it
continues as are all on the run's own queue. On the deployment's queue itself each worker only
*announces* its catalogue: an activity poller that is never given work, whose identity carries
the digest and a short hash of each name (``announcement``). A client reads them with
DescribeTaskQueue (``announced``) and sends a run to the queue of a catalogue that has every
tool and probe the plan names.

Temporal refuses a poll whose identity is longer than 1,000 characters (silently: the worker
never polls), so names are hashed to 6 hex characters; a catalogue too large even then is
announced by its digest alone, and is known to hold a plan's names only by a client whose own
catalogue has that digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

SEPARATOR = "@"
MARK = "plangate-catalogue="
IDENTITY_MAX = 1000  # Temporal's limit on a poller's identity
_HASH_CHARS = 6


def name_hash(kind: str, name: str) -> str:
    """A short hash of a tool's or probe's name (``kind``: ``tool`` or ``probe``)."""
    return hashlib.sha256(f"{kind}:{name}".encode()).hexdigest()[:_HASH_CHARS]


@dataclass(frozen=True)
class Announced:
    """A catalogue as a worker announces it: its digest and the hashes of its names (None: too
    many to announce, the digest alone)."""

    digest: str
    hashes: frozenset[str] | None

    @classmethod
    def of(cls, tools: Iterable[str], probes: Iterable[str]) -> Announced:
        names = sorted({f"tool:{t}" for t in tools} | {f"probe:{p}" for p in probes})
        digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:8]
        hashes = frozenset(name_hash(*n.split(":", 1)) for n in names)
        return cls(digest, hashes)

    def lacks(self, tools: Iterable[str], probes: Iterable[str]) -> list[str] | None:
        """The names given that this catalogue lacks, sorted ([]: it has them all); None when
        it announced its digest alone."""
        if self.hashes is None:
            return None
        have = self.hashes
        return sorted(
            {t for t in tools if name_hash("tool", t) not in have}
            | {p for p in probes if name_hash("probe", p) not in have}
        )

    def token(self) -> str:
        return MARK + self.digest + ("" if self.hashes is None else ":" + "".join(
            sorted(self.hashes)))


def catalogue_queue(deployment_queue: str, digest: str) -> str:
    """The task queue of the workers of one catalogue on a deployment's queue."""
    return f"{deployment_queue}{SEPARATOR}{digest}"


def of_deployment(queue: str, deployment_queue: str) -> bool:
    """Whether ``queue`` is the deployment's queue or one of its catalogue queues."""
    head, sep, tail = queue.partition(SEPARATOR)
    return head == deployment_queue and (not sep or (bool(tail) and SEPARATOR not in tail))


def visibility_clause(deployment_queue: str) -> str:
    """A visibility query's condition for the runs of a deployment's queue (its catalogue
    queues, and the queue itself for runs started before there were any)."""
    q = _quoted(deployment_queue)
    prefix = _quoted(deployment_queue + SEPARATOR)
    return f"(TaskQueue = {q} OR TaskQueue STARTS_WITH {prefix})"


def announcement(identity: str, catalogue: Announced) -> str:
    """The identity an announcing poller takes: the worker's own, then the catalogue; by its
    digest alone where the names do not fit Temporal's limit."""
    full = f"{identity} {catalogue.token()}"
    if len(full) <= IDENTITY_MAX:
        return full
    return f"{identity[: IDENTITY_MAX - 40]} {Announced(catalogue.digest, None).token()}"


def announced(identity: str) -> tuple[str, Announced] | None:
    """(the worker's own identity, its catalogue) from an announcing poller's identity; None for
    any other poller."""
    own, sep, token = identity.rpartition(" " + MARK)
    if not sep:
        return None
    digest, _, hashes = token.partition(":")
    if not digest or any(c not in "0123456789abcdef" for c in digest + hashes):
        return None
    n = _HASH_CHARS
    found = None if not hashes else frozenset(hashes[i:i + n] for i in range(0, len(hashes), n))
    return own, Announced(digest, found)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
