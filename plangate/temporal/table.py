"""The guard table: which of a team's own activities plangate guards, and how.

An entry names an activity by its Temporal name and says what a call of it does (its effect
class), which of plangate's probes judge it before and after (``Term``: a probe with arguments
taken from the activity's), how an effect of it is read back by its key (``reader``: another
activity of the team's, called by the probes), and what a failed check leads to. Activities the
table does not name are not touched. Written in Python or in YAML::

    activities:
      issue_credit:
        effect: money
        approval: true
        amount: amount_cents
        amount_unit: cents
        reader: {activity: find_credit, args: {key: key}}
        post:
          - {probe: effect_recorded}

The activity's arguments are seen as JSON, as the team's data converter sends them: a single
argument that is an object (a pydantic model, a dataclass) by its fields, else by parameter
name. Nothing here reads the world.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from plangate.errors import ConfigurationError
from plangate.plans.amounts import AmountUnit
from plangate.plans.bindings import arg_at
from plangate.plans.catalogue import Term
from plangate.plans.model import Condition, Effect


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Check(_Model):
    """One condition: ``probe`` with arguments from the activity's (``from_args``: probe
    argument <- activity argument, ``name`` or ``name.inner``) and fixed ones (``args``)."""

    probe: str = Field(min_length=1)
    from_args: dict[str, str] = Field(default_factory=dict)
    args: dict[str, JsonValue] = Field(default_factory=dict)
    # proves this very call's effect is in place (a record read by its key): see plans.catalogue
    identifies: bool = False

    def term(self) -> Term:
        return Term(self.probe, dict(self.from_args), dict(self.args), self.identifies)


class ReadBack(_Model):
    """The team's activity that reads the record a call of the guarded one makes: its argument
    sources are ``key`` (the call's idempotency key), ``args.NAME`` (the guarded call's) or
    ``output.NAME`` (its result's). It answers the record, or None when there is none."""

    activity: str = Field(min_length=1)
    args: dict[str, str] = Field(default_factory=lambda: {"key": "key"})


class ActivityGuard(_Model):
    effect: Effect
    pre: list[Check] = Field(default_factory=list)
    post: list[Check] = Field(default_factory=list)
    reader: ReadBack | None = None
    # every call waits for a person's approval, whatever the deployment says of its effect
    approval: bool = False
    amount: str | None = None  # the argument holding the amount it moves (money)
    # its unit: whole currency units (7.25) or cents (725): ``plans.amounts``
    amount_unit: AmountUnit = "units"
    # a failed check: the workflow sees a non-retryable activity failure naming it ("fail"),
    # or the workflow fails ("halt"). An unknown money outcome always halts.
    on_failure: Literal["fail", "halt"] = "fail"
    # the names of the activity's parameters (default: read from the activity's function);
    # required where a worker runs the workflows calling it and not the activity itself
    params: list[str] | None = None


class GuardTable(_Model):
    activities: dict[str, ActivityGuard] = Field(default_factory=dict)

    def get(self, activity: str) -> ActivityGuard | None:
        return self.activities.get(activity)

    def with_params(self, found: Mapping[str, list[str]]) -> GuardTable:
        """The table with each entry's parameter names, where it gives none, from ``found``
        (activity name -> its function's parameters)."""
        out = {
            name: g if g.params is not None or name not in found
            else g.model_copy(update={"params": list(found[name])})
            for name, g in self.activities.items()
        }
        return GuardTable(activities=out)

    @classmethod
    def load(cls, source: str | Path | Mapping[str, Any]) -> GuardTable:
        """From a mapping, or a YAML or JSON file; ``ConfigurationError`` naming each problem
        (its entry and field)."""
        where = "the guard table"
        data: Any = source
        if isinstance(source, str | Path):
            where = str(source)
            try:
                data = yaml.safe_load(Path(source).read_text())
            except (OSError, yaml.YAMLError) as e:
                raise ConfigurationError(f"{where}: {e}") from None
        try:
            return cls.model_validate(data or {})
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()
            )
            raise ConfigurationError(f"{where}: {problems}") from None


def arguments(values: list[JsonValue], params: list[str] | None) -> dict[str, JsonValue]:
    """An activity's arguments as the table binds from: a single object by its fields, else by
    parameter name (``arg0``, ``arg1``... where the names are not known)."""
    if len(values) == 1 and isinstance(values[0], dict):
        return dict(values[0])
    names = list(params or [])
    return {names[i] if i < len(names) else f"arg{i}": v for i, v in enumerate(values)}


class UnboundCheck(ValueError):
    """A check names an argument the call does not give: the call is not judged, so it does
    not act."""


def conditions(checks: list[Check], args: Mapping[str, JsonValue]) -> list[Condition]:
    """The checks bound to a call's arguments; ``UnboundCheck`` naming one whose argument the
    call does not give (never left out: a check that cannot be made is no pass)."""
    out = []
    for c in checks:
        cond = c.term().bind(args)
        if cond is None:
            missing = [src for src in c.from_args.values() if arg_at(args, src) is None]
            raise UnboundCheck(f"check {c.probe}: the call gives no argument {missing[0]!r}"
                               if missing else f"check {c.probe} cannot be bound")
        out.append(cond)
    return out
