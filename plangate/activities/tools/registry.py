"""The tool registry: a tool is its catalogue entry (``plans.catalogue.ToolInfo``: name,
argument model, effect, contract, reader, what it reads and writes) and the function that does
the work.

``@tool`` *declares* a tool when its module is imported: ``TOOLS`` holds every tool declared in
this process, by name (two declarations of one name are an error). Which tools a deployment
*has* (its worker's activities, what ``check`` and the re-planner know) is decided by its
``CatalogueSettings``: ``activities.extensions.registry_for(catalogue)``, which registers the
tools of the modules it turns on (``declared_in``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue

from plangate.plans.amounts import AmountUnit
from plangate.plans.catalogue import Contract, Reader, ToolInfo, VersionBinding
from plangate.plans.model import Effect
from plangate.plans.scope import Reads, Writes
from plangate.world.runfiles import RunFiles, no_files

if TYPE_CHECKING:
    from plangate.world.clients import World

A = TypeVar("A", bound=BaseModel)


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


PROBE_READ = "probe"  # the run_id of a reader's call made for a field probe (no run acts)


@dataclass(frozen=True)
class CallContext:
    run_id: str
    n: int
    idempotency_key: str
    on_behalf_of: str | None = None  # whose authority the call acts under: re-checked here
    policy_bundle: str | None = None  # the policy version the plan was decided under
    # the run's own files, its directory derived by the worker (``activities.workspace``)
    files: RunFiles = field(default_factory=no_files)


ToolFn = Callable[[A, "World", CallContext], Awaitable[dict[str, JsonValue]]]


@dataclass(frozen=True, kw_only=True)
class ToolSpec(ToolInfo, Generic[A]):
    fn: ToolFn[A]


TOOLS: dict[str, ToolSpec[Any]] = {}


def tool(
    name: str,
    args: type[A],
    effect: Effect,
    contract: Contract | None = None,
    reader: Reader | None = None,
    writes: tuple[Writes, ...] = (),
    version: VersionBinding | None = None,
    reads: tuple[Reads, ...] = (),
    approval: bool = False,
    amount: str | None = None,
    local_paths: tuple[str, ...] | None = None,
    amount_unit: AmountUnit = "units",
) -> Callable[[ToolFn[A]], ToolFn[A]]:
    """``local_paths``: the arguments that name a file in the work directory, which ``check``
    confines to it (None: ``dest``, ``source`` and ``path``; ``()``: none, e.g. a remote
    system's paths). ``amount``: the argument holding the amount a money tool moves, in
    ``amount_unit`` (``units``: 7.25; ``cents``: 725; ``plans.amounts``)."""

    def register(fn: ToolFn[A]) -> ToolFn[A]:
        if name in TOOLS:
            raise ValueError(
                f"tool {name!r} is declared twice: by {TOOLS[name].fn.__module__} "
                f"and by {fn.__module__}"
            )
        TOOLS[name] = ToolSpec(
            name, args, effect, contract or Contract(), reader, writes, version, reads,
            approval, amount, description=inspect.getdoc(fn) or "", local_paths=local_paths,
            amount_unit=amount_unit, fn=fn,
        )
        return fn

    return register


def declared_in(module: ModuleType) -> dict[str, ToolSpec[Any]]:
    """The tools ``module`` (and, for a package, its submodules) declares with ``@tool``."""
    return {n: s for n, s in TOOLS.items() if _within(s.fn.__module__, module.__name__)}


def _within(declaring: str, module: str) -> bool:
    return declaring == module or declaring.startswith(module + ".")
