"""Probes are named functions in a registry; a plan names one and supplies its arguments.

A probe function returns a ``Verdict`` (holds or violated, with what it observed). Anything it
raises means it could not answer: the probe activity records that as ``unknown``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue

from plangate.plans.catalogue import ProbeInfo
from plangate.plans.scope import Reads
from plangate.world.runfiles import RunFiles, no_files

if TYPE_CHECKING:
    from plangate.world.clients import World

A = TypeVar("A", bound=BaseModel)


class ProbeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Verdict:
    holds: bool
    observed: Any = None  # JSON-ready: a count, an ETag, a record field
    detail: str = ""


class Unjudgeable(LookupError):
    """An answer that says nothing a probe can judge (no content, not JSON, a key named
    twice): the probe could not answer, so it is ``unknown``, never ``holds``."""


class NoRecord(Exception):
    """The reader found no record (``not_found``), or cannot name one yet."""


# Re-reads the record the guarded step touched, through its tool's reader; raises NoRecord.
ReadRecord = Callable[[], Awaitable[dict[str, JsonValue]]]


async def _no_reader() -> dict[str, JsonValue]:
    raise LookupError("the step's tool declares no reader for field probes")


@dataclass(frozen=True)
class ProbeContext:
    """The step a probe guards. Field probes re-read its record with ``read`` (the probe
    activity builds it from the tool's reader); ``reads_by_key``: that reader reads by the
    call's idempotency key, so "not found" means the call certainly did not act."""

    tool: str
    args: dict[str, JsonValue]
    idempotency_key: str = ""
    read: ReadRecord = _no_reader
    reads_by_key: bool = False
    run_id: str = ""  # the plan run, as the request names it (a job's owner)
    # the run's own files, its directory derived by the worker (``activities.workspace``)
    files: RunFiles = field(default_factory=no_files)


ProbeFn = Callable[[A, "World", ProbeContext], Awaitable[Verdict]]


@dataclass(frozen=True, kw_only=True)
class ProbeSpec(ProbeInfo, Generic[A]):
    fn: ProbeFn[A]


PROBES: dict[str, ProbeSpec[Any]] = {}


def probe(
    name: str, args: type[A], system: str, reads: tuple[Reads, ...] = ()
) -> Callable[[ProbeFn[A]], ProbeFn[A]]:
    """``reads``: the arguments that name what it reads, where a plan chooses it (plans.scope);
    what it reads by design (``table_loaded_from``: plangate's record of loads) is not one."""

    def register(fn: ProbeFn[A]) -> ProbeFn[A]:
        if name in PROBES:
            raise ValueError(
                f"probe {name!r} is declared twice: by {PROBES[name].fn.__module__} "
                f"and by {fn.__module__}"
            )
        PROBES[name] = ProbeSpec(name, args, system, reads, fn=fn)
        return fn

    return register


def declared_in(module: ModuleType) -> dict[str, ProbeSpec[Any]]:
    """The probes ``module`` (and, for a package, its submodules) declares with ``@probe``."""
    name = module.__name__
    return {
        n: s for n, s in PROBES.items()
        if s.fn.__module__ == name or s.fn.__module__.startswith(name + ".")
    }
