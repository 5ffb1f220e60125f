"""Probes are named functions in a registry; a plan names one and supplies its arguments.

A probe function returns a ``Verdict`` (holds or violated, with what it observed). Anything it
raises means it could not answer: the probe activity records that as ``unknown``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue

if TYPE_CHECKING:
    from world.clients import World

A = TypeVar("A", bound=BaseModel)


class ProbeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Verdict:
    holds: bool
    observed: Any = None  # JSON-ready: a count, an ETag, a record field
    detail: str = ""


@dataclass(frozen=True)
class ProbeContext:
    """The step a probe guards: field probes re-read its record through the tool's reader."""

    tool: str
    args: dict[str, JsonValue]
    idempotency_key: str = ""
    output: dict[str, JsonValue] | None = None  # the tool's result, in the post phase


ProbeFn = Callable[[A, "World", ProbeContext], Awaitable[Verdict]]


@dataclass(frozen=True)
class ProbeSpec(Generic[A]):
    name: str
    args: type[A]
    fn: ProbeFn[A]
    system: str


PROBES: dict[str, ProbeSpec[Any]] = {}


def probe(name: str, args: type[A], system: str) -> Callable[[ProbeFn[A]], ProbeFn[A]]:
    def register(fn: ProbeFn[A]) -> ProbeFn[A]:
        if name in PROBES:
            raise ValueError(f"probe {name!r} registered twice")
        PROBES[name] = ProbeSpec(name=name, args=args, fn=fn, system=system)
        return fn

    return register
