"""plangate's Cedar schema (``plangate.cedarschema``, beside this module) and how a call's values
become Cedar values.

The schema is fixed but for one common type, ``Args``: every argument of the catalogue's tools
whose type Cedar can hold, each optional (a policy tests ``context.args has amount_eur``).
An argument two tools declare with different types is left out: no policy could rely on it.

Numbers: whole numbers are Cedar ``Long``s; floats (and decimals) Cedar ``decimal``s, four
places, rounded away from zero (a policy never sees less than was asked); amounts in ``context``
are whole cents (``Long``, so they add up: Cedar's decimals do not). A number Cedar cannot hold
(beyond 64 bits) is an error, and an error forbids.
"""

from __future__ import annotations

import functools
import json
import types
import typing
from collections.abc import Mapping
from decimal import ROUND_UP, Decimal, InvalidOperation
from importlib import resources
from typing import Any, Literal

from pydantic import JsonValue

from plangate.plans.catalogue import Catalogue

SCHEMA_FILE = "plangate.cedarschema"
_ARGS_LINE = "type Args = {};"
CedarType = Literal["Long", "decimal", "String", "Bool"]
_LONG = 2**63
_DECIMAL_MAX = Decimal("922337203685477.5807")
_PLACES = Decimal("0.0001")


class ValueProblem(ValueError):
    """A value Cedar cannot hold as its schema says."""


@functools.cache
def base_schema() -> str:
    """The schema as shipped (``Args`` empty)."""
    return resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


def _cedar_type(annotation: Any) -> CedarType | None:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _cedar_type(inner[0]) if len(inner) == 1 else None
    if origin is typing.Annotated:
        return _cedar_type(typing.get_args(annotation)[0])
    if origin is Literal:
        values = typing.get_args(annotation)
        return "String" if all(isinstance(v, str) for v in values) else None
    if annotation is bool:
        return "Bool"
    if annotation is int:
        return "Long"
    if annotation in (float, Decimal):
        return "decimal"
    if annotation is str:
        return "String"
    return None


def arg_types(catalogue: Catalogue) -> dict[str, CedarType]:
    """Every tool argument Cedar can hold, by name, with its type (sorted)."""
    found: dict[str, CedarType | None] = {}
    for tool in catalogue.tools.values():
        for name, f in tool.args.model_fields.items():
            t = _cedar_type(f.annotation)
            if name in found and found[name] != t:
                found[name] = None  # two tools, two types: left out
            elif name not in found:
                found[name] = t
    return {k: v for k, v in sorted(found.items()) if v is not None}


def schema_text(types_: Mapping[str, CedarType]) -> str:
    """The whole schema: the shipped one with ``Args`` of ``types_``."""
    fields = ", ".join(f"{json.dumps(k)}?: {v}" for k, v in types_.items())
    return base_schema().replace(_ARGS_LINE, f"type Args = {{{fields}}};", 1)


def decimal(value: Decimal | float | int) -> dict[str, Any]:
    """A Cedar decimal (its JSON form), four places, rounded away from zero."""
    try:
        exact = Decimal(str(value))
        if abs(exact) > _DECIMAL_MAX:
            raise ValueProblem(f"{value!r} is beyond what Cedar's decimal holds")
        d = exact.quantize(_PLACES, rounding=ROUND_UP)
    except InvalidOperation:
        raise ValueProblem(f"{value!r} is not a number Cedar's decimal holds") from None
    if abs(d) > _DECIMAL_MAX:  # rounded up past the end
        raise ValueProblem(f"{value!r} is beyond what Cedar's decimal holds")
    return {"__extn": {"fn": "decimal", "arg": str(d)}}


def cents(value: Decimal | float | int) -> int:
    """Whole cents of an amount, rounded away from zero (beyond a Long, a decision forbids)."""
    return int((Decimal(str(value)) * 100).to_integral_value(rounding=ROUND_UP))


def long(value: int) -> int:
    if not -_LONG <= value < _LONG:
        digits = str(value)
        shown = digits if len(digits) <= 24 else f"a number of {len(digits)} digits"
        raise ValueProblem(f"{shown} is beyond a 64-bit Long")
    return value


def unbound(value: JsonValue) -> bool:
    """An argument still holding a ``${name}`` reference (a plan as written)."""
    return isinstance(value, str) and "${" in value


def cedar_args(
    args: Mapping[str, JsonValue], types_: Mapping[str, CedarType]
) -> tuple[dict[str, Any], list[str]]:
    """``args`` as the ``Args`` record: the arguments the schema knows, converted; and the names
    of those left out because they are not bound yet (``${...}``). ``ValueProblem`` for a value
    of another type than its tool's."""
    out: dict[str, Any] = {}
    left: list[str] = []
    for name, t in types_.items():
        if name not in args or args[name] is None:
            continue
        v = args[name]
        if unbound(v):
            left.append(name)
            continue
        try:
            out[name] = _value(v, t)
        except ValueProblem as e:
            raise ValueProblem(f"args.{name}: {e}") from None
    return out, left


def _value(v: JsonValue, t: CedarType) -> Any:
    if t == "Bool" and isinstance(v, bool):
        return v
    if t == "Long" and isinstance(v, int) and not isinstance(v, bool):
        return long(v)
    if t == "decimal" and isinstance(v, int | float) and not isinstance(v, bool):
        return decimal(v)
    if t == "String" and isinstance(v, str):
        return v
    raise ValueProblem(f"a {type(v).__name__}, not the {t} its tool takes")
