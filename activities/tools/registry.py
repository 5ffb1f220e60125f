"""The tool registry and tool contracts.

A contract lists the conditions true of every use of a tool, each bound from the step's own
arguments; ``conditions_for`` adds the plan's conditions after them. Pure: workflows use it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue

from plans.bindings import arg_at
from plans.model import Condition, Effect, Step
from plans.scope import Writes

if TYPE_CHECKING:
    from world.clients import World

A = TypeVar("A", bound=BaseModel)
Phase = Literal["pre", "post"]


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Term:
    """One contract condition: ``probe`` with arguments taken from the step's arguments."""

    probe: str
    from_args: Mapping[str, str]  # probe argument <- step argument
    fixed: Mapping[str, JsonValue] = field(default_factory=dict)
    # True when holding proves *this* call's effect is in place, not merely a state an older
    # effect also satisfies (a row count does not; the loaded content's fingerprint does).
    # Only such terms let a step be skipped as already done.
    identifies: bool = False
    # The term applies only to calls whose arguments have these values (``run_sql``: the
    # contract of one registered statement).
    when: Mapping[str, JsonValue] = field(default_factory=dict)

    def bind(self, args: Mapping[str, Any]) -> Condition | None:
        if any(arg_at(args, k) != v for k, v in self.when.items()):
            return None
        bound = {dst: arg_at(args, src) for dst, src in self.from_args.items()}
        if any(v is None for v in bound.values()):
            return None  # the optional argument this term reads was not given
        return Condition(probe=self.probe, args={**self.fixed, **bound})




@dataclass(frozen=True)
class Contract:
    pre: tuple[Term, ...] = ()
    post: tuple[Term, ...] = ()
    # Evidence read only before the call: when it holds, the call would change nothing (a job
    # already at the state the call sets). Post terms marked ``identifies`` are evidence too.
    done: tuple[Term, ...] = ()


@dataclass(frozen=True)
class Reader:
    """How field probes re-read the record a step touched: a read tool and where its arguments
    come from (``args.NAME`` of the step, ``output.NAME`` of its result, or ``key``, the step's
    idempotency key)."""

    tool: str
    args: Mapping[str, str]


@dataclass(frozen=True)
class CallContext:
    run_id: str
    n: int
    idempotency_key: str


ToolFn = Callable[[A, "World", CallContext], Awaitable[dict[str, JsonValue]]]


@dataclass(frozen=True)
class ToolSpec(Generic[A]):
    name: str
    args: type[A]
    effect: Effect
    contract: Contract
    fn: ToolFn[A]
    reader: Reader | None = None
    writes: tuple[Writes, ...] = ()  # the arguments that name what it writes (plans.scope)


TOOLS: dict[str, ToolSpec[Any]] = {}


def tool(
    name: str,
    args: type[A],
    effect: Effect,
    contract: Contract | None = None,
    reader: Reader | None = None,
    writes: tuple[Writes, ...] = (),
) -> Callable[[ToolFn[A]], ToolFn[A]]:
    def register(fn: ToolFn[A]) -> ToolFn[A]:
        if name in TOOLS:
            raise ValueError(f"tool {name!r} registered twice")
        TOOLS[name] = ToolSpec(name, args, effect, contract or Contract(), fn, reader, writes)
        return fn

    return register


def effective_effect(step: Step) -> Effect:
    """The stronger of what the plan declares and what the tool is known to do."""
    spec = TOOLS.get(step.tool)
    declared = step.effect
    return spec.effect if spec and spec.effect.rank > declared.rank else declared


def contract_conditions(tool_name: str, phase: Phase, args: Mapping[str, Any]) -> list[Condition]:
    spec = TOOLS.get(tool_name)
    if spec is None:
        return []
    terms = spec.contract.pre if phase == "pre" else spec.contract.post
    return [c for c in (t.bind(args) for t in terms) if c is not None]


def skip_evidence(tool_name: str, args: Mapping[str, Any]) -> list[Condition]:
    """The post conditions of the tool's contract that identify this call's effect. A step may
    be skipped as already done only when these exist and hold (with every other post)."""
    spec = TOOLS.get(tool_name)
    if spec is None:
        return []
    terms = [*(t for t in spec.contract.post if t.identifies), *spec.contract.done]
    return [c for t in terms if (c := t.bind(args)) is not None]


def conditions_for(
    step: Step, phase: Phase, args: Mapping[str, Any], plan_conditions: list[Condition]
) -> list[Condition]:
    """The contract's conditions bound from ``args`` (the step's resolved arguments), then the
    plan's own (already resolved), each claim once."""
    by_key: dict[str, Condition] = {}
    for c in [*contract_conditions(step.tool, phase, args), *plan_conditions]:
        by_key[c.key()] = c  # the plan's copy wins: it may carry a wait
    return list(by_key.values())
