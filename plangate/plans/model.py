"""Pydantic models of the plan language (DESIGN.md section 2)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from plangate.plans import limits

# Every model of the language: unknown fields are errors, values are immutable, and NaN or an
# infinity is never a number a plan may hold (JSON would not even carry it).
_CONFIG = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)


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


# The effects the ledger records (intent, then outcome) under the call's idempotency key: a
# read is repeated freely, these are done at most once.
LEDGERED = frozenset({Effect.WRITE, Effect.EXTERNAL, Effect.MONEY})


class OnUnmet(StrEnum):
    REPLAN = "replan"
    HALT = "halt"
    RETRY = "retry"


class WaitSpec(BaseModel):
    """Poll for a state an action brings about: finite, and never faster than once a second
    (``plans.limits``)."""

    model_config = _CONFIG
    timeout_s: float = 3600
    interval_s: float = 60

    @field_validator("timeout_s")
    @classmethod
    def _finite_timeout(cls, v: float) -> float:
        if not 0 < v <= limits.MAX_WAIT_TIMEOUT_S:
            raise PydanticCustomError(
                "wait_timeout",
                "{value} s: a wait lasts more than 0 s and at most {max} s (7 days)",
                {"value": v, "max": f"{limits.MAX_WAIT_TIMEOUT_S:.0f}"},
            )
        return v

    @field_validator("interval_s")
    @classmethod
    def _sane_interval(cls, v: float) -> float:
        if v < limits.MIN_WAIT_INTERVAL_S:
            raise PydanticCustomError(
                "wait_interval",
                "{value} s: a wait polls at most once every {min} s",
                {"value": v, "min": f"{limits.MIN_WAIT_INTERVAL_S:g}"},
            )
        return v

    @model_validator(mode="after")
    def _interval_within_timeout(self) -> WaitSpec:
        if self.interval_s > self.timeout_s:
            raise PydanticCustomError(
                "wait_interval",
                "interval_s {interval} s is longer than timeout_s {timeout} s",
                {"interval": self.interval_s, "timeout": self.timeout_s},
            )
        return self


class Condition(BaseModel):
    """``{"probe": NAME, ...probe args}``, optionally with ``wait``.

    Written flat in plans; held as ``probe`` + ``args`` so probe arguments never collide with
    the fields of the condition itself.
    """

    model_config = _CONFIG
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
    model_config = _CONFIG
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
    model_config = _CONFIG
    replans_max: int = Field(default=2, ge=0, le=10)


# who the run acts for, the policy version it was decided under: names, not prose
_PRINCIPAL = r"^[A-Za-z_][A-Za-z0-9_.@\-]{0,62}$"


class Plan(BaseModel):
    model_config = _CONFIG
    goal: str = Field(min_length=1)
    budget: Budget = Field(default_factory=Budget)
    steps: list[Step] = Field(min_length=1)
    # Run-level, all optional (DESIGN.md section 2).
    made_at: datetime | None = None  # when the plan was written: the staleness window's start
    on_behalf_of: str | None = Field(default=None, pattern=_PRINCIPAL)
    policy_bundle: str | None = Field(default=None, min_length=1, max_length=200)
    # how long an approval card stays valid (default: the deployment's, 24 h)
    approval_ttl_s: float | None = Field(default=None, gt=0, le=limits.MAX_WAIT_TIMEOUT_S)

    @field_validator("made_at")
    @classmethod
    def _zoned(cls, v: datetime | None) -> datetime | None:
        # A time without a zone is no instant: it cannot be compared with the clock the
        # staleness window is measured by (the CLI's --start-at refuses one alike).
        if v is not None and v.utcoffset() is None:
            raise PydanticCustomError(
                "timezone_aware",
                "{value} has no time zone (add Z or +01:00)",
                {"value": v.isoformat()},
            )
        return v

    @field_validator("steps", mode="before")
    @classmethod
    def _not_too_many(cls, v: Any) -> Any:
        # Before the steps are validated one by one: a huge list is refused at its length.
        if isinstance(v, list) and len(v) > limits.MAX_STEPS:
            raise PydanticCustomError(
                "too_many_steps",
                "{count} steps; a plan has at most {max} steps",
                {"count": len(v), "max": limits.MAX_STEPS},
            )
        return v

    def step(self, n: int) -> Step:
        for s in self.steps:
            if s.n == n:
                return s
        raise KeyError(n)
