"""What the plan language needs to know of tools and probes, and nothing more: their names,
argument models, effects, contracts, readers and what they read and write. The registries fill a
``Catalogue`` (``activities.catalogue``); validation and guards read it. No engine, no world.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, JsonValue
from pydantic.dataclasses import dataclass as model_dataclass

from plangate.plans.amounts import AmountUnit
from plangate.plans.bindings import arg_at
from plangate.plans.model import Condition, Effect
from plangate.plans.scope import Reads, Writes


@model_dataclass(frozen=True)
class Term:
    """One contract condition: ``probe`` with arguments taken from the step's arguments
    (``name`` or ``name.inner``), plus fixed ones."""

    probe: str
    from_args: dict[str, str]  # probe argument <- step argument
    fixed: dict[str, JsonValue] = field(default_factory=dict)
    # True when holding proves *this* call's effect is in place, not merely a state an older
    # effect also satisfies (a row count does not; the loaded content's fingerprint does).
    # Only such terms let a step be skipped as already done.
    identifies: bool = False
    # The term applies only to calls whose arguments have these values (``run_sql``: the
    # contract of one registered statement).
    when: dict[str, JsonValue] = field(default_factory=dict)

    def bind(self, args: Mapping[str, Any]) -> Condition | None:
        if any(arg_at(args, k) != v for k, v in self.when.items()):
            return None
        bound = {dst: arg_at(args, src) for dst, src in self.from_args.items()}
        if any(v is None for v in bound.values()):
            return None  # the optional argument this term reads was not given
        return Condition(probe=self.probe, args={**self.fixed, **bound})


@model_dataclass(frozen=True)
class Contract:
    pre: tuple[Term, ...] = ()
    post: tuple[Term, ...] = ()
    # Evidence read only before the call: when it holds, the call would change nothing (a job
    # already at the state the call sets). Post terms marked ``identifies`` are evidence too.
    done: tuple[Term, ...] = ()


@model_dataclass(frozen=True)
class VersionBinding:
    """A write that can carry the version its own pre probe observed, so the system refuses it
    if the resource moved in between (check and act become one operation). Unless the plan gives
    one of ``set_by`` itself, the step probes ``term`` before the call and passes what it
    observed (``observed``: a key of it; None: all of it) as argument ``arg``; when the probe
    saw no such resource, ``when_absent`` instead (S3: create only if still absent)."""

    arg: str
    term: Term
    observed: str | None = None
    when_absent: dict[str, JsonValue] = field(default_factory=dict)
    set_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reader:
    """How field probes re-read the record a step touched: a read tool and where its arguments
    come from (``args.NAME`` of the step, ``output.NAME`` of its result, or ``key``, the step's
    idempotency key)."""

    tool: str
    args: Mapping[str, str]

    @property
    def by_key(self) -> bool:
        """Reads by the call's idempotency key alone (and the step's own arguments): the only
        reader that can say a call certainly did not act."""
        sources = self.args.values()
        return "key" in sources and all(s == "key" or s.startswith("args.") for s in sources)


@dataclass(frozen=True)
class ToolInfo:
    name: str
    args: type[BaseModel]
    effect: Effect
    contract: Contract = field(default_factory=Contract)
    reader: Reader | None = None
    writes: tuple[Writes, ...] = ()  # what it writes (plans.scope)
    version: VersionBinding | None = None  # a write that carries the version its probe saw
    reads: tuple[Reads, ...] = ()  # the arguments that name what it reads (plans.scope)
    # every call of it waits for a person, whatever the plan or the deployment says
    approval: bool = False
    # the argument that holds the amount it moves (money): recorded in the effect ledger
    amount: str | None = None
    # what it does, in words, for a person or a model choosing it (its function's docstring,
    # the MCP servers file's ``description``); no check reads it
    description: str = ""
    # the arguments that name a file in plangate's work directory, judged against it by check
    # (None: plangate's own naming, ``dest``, ``source`` and ``path``). A tool of an MCP
    # server's has none: its paths are that server's, whatever their names
    local_paths: tuple[str, ...] | None = None
    # the unit of ``amount``'s argument: whole currency units (7.25) or cents (725)
    # (``plans.amounts``)
    amount_unit: AmountUnit = "units"


@dataclass(frozen=True)
class ProbeInfo:
    name: str
    args: type[BaseModel]
    system: str  # "s3", "postgres", "file", "record" (reads the step's record via a reader)
    reads: tuple[Reads, ...] = ()  # the arguments that name what it reads (plans.scope)
    # the arguments that name a local file (None: ``dest`` and ``source``, and ``path`` too for
    # a "file" probe); an MCP server's probe has none
    local_paths: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Catalogue:
    tools: Mapping[str, ToolInfo]
    probes: Mapping[str, ProbeInfo]

    def effect_of(self, tool: str, declared: Effect) -> Effect:
        """The stronger of what a step declares and what its tool is known to do."""
        spec = self.tools.get(tool)
        return spec.effect if spec and spec.effect.rank > declared.rank else declared
