"""Pydantic models of the plan language (DESIGN.md section 2)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)


class Effect(StrEnum):
    """What a step does to the world, weakest first."""

    READ = "read"
    WRITE = "write"
    EXTERNAL = "external"  # leaves the organisation: email, vendor request
    MONEY = "money"  # moves money

    @property
    def rank(self) -> int:
        return list(Effect).index(self)

    @property
    def outcome_must_be_known(self) -> bool:
        """An unknown outcome of these cannot be retried blindly or replanned around."""
        return self in (Effect.EXTERNAL, Effect.MONEY)


class OnUnmet(StrEnum):
    REPLAN = "replan"
    HALT = "halt"
    RETRY = "retry"


class WaitSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    timeout_s: float = Field(default=3600, gt=0)
    interval_s: float = Field(default=60, gt=0)


class Condition(BaseModel):
    """``{"probe": NAME, ...probe args}``, optionally with ``wait``.

    Written flat in plans; held as ``probe`` + ``args`` so probe arguments never collide with
    the fields of the condition itself.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    probe: str
    args: dict[str, JsonValue] = Field(default_factory=dict)
    wait: WaitSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_flat(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "probe" not in data:
            return data
        if set(data) <= {"probe", "args", "wait"} and isinstance(data.get("args"), dict):
            return data
        flat = dict(data)
        out: dict[str, Any] = {"probe": flat.pop("probe")}
        if "wait" in flat:
            out["wait"] = flat.pop("wait")
        out["args"] = flat
        return out

    @model_serializer(mode="plain")
    def _to_flat(self) -> dict[str, Any]:
        out: dict[str, Any] = {"probe": self.probe, **self.args}
        if self.wait is not None:
            out["wait"] = self.wait.model_dump()
        return out

    def key(self) -> str:
        """Identity of the claim (probe and arguments), used to find who owes a state."""
        parts = ",".join(f"{k}={self.args[k]!r}" for k in sorted(self.args))
        return f"{self.probe}({parts})"


def _as_list(value: Any) -> Any:
    # A single condition object is accepted where a list is expected.
    return [value] if isinstance(value, dict) else value


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    n: int = Field(gt=0)
    tool: str
    effect: Effect = Effect.WRITE
    args: dict[str, JsonValue] = Field(default_factory=dict)
    depends_on: list[int] = Field(default_factory=list)
    binds: dict[str, str] = Field(default_factory=dict)
    pre: list[Condition] = Field(default_factory=list)
    post: list[Condition] = Field(default_factory=list)
    on_unmet: OnUnmet = OnUnmet.REPLAN
    approval: Literal["required"] | None = None

    @model_serializer(mode="wrap")
    def _declared_only(self, handler: SerializerFunctionWrapHandler) -> Any:
        # An effect the plan did not declare stays undeclared through a round trip, so "declares
        # an effect weaker than its tool" is judged on what was written, not on the default.
        out = handler(self)
        if isinstance(out, dict) and "effect" not in self.model_fields_set:
            out.pop("effect", None)
        return out

    @model_validator(mode="before")
    @classmethod
    def _lenient_conditions(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for phase in ("pre", "post"):
                if phase in data:
                    data[phase] = _as_list(data[phase])
        return data


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    replans_max: int = Field(default=2, ge=0, le=10)


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    goal: str = Field(min_length=1)
    budget: Budget = Field(default_factory=Budget)
    steps: list[Step] = Field(min_length=1)

    def step(self, n: int) -> Step:
        for s in self.steps:
            if s.n == n:
                return s
        raise KeyError(n)
