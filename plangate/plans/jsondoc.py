"""Documents a probe judges: read strictly, compared by JSON type.

A probe's claim is only as good as the document it reads. Text that is not one JSON document,
or names a key twice (which value is meant?), is no document: ``loads`` refuses it, never
guessing as ``json.loads`` does (the last key wins, ``NaN`` is a number). And JSON values are
compared as JSON, not as Python: ``false`` is not ``0`` (Python's ``False == 0``), ``1.0`` is
``1`` only because both are numbers.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import JsonValue

from plangate.plans import jsonpath

SHOWN = 80  # characters of a refused text its error quotes


class NotJson(ValueError):
    """Text that is not one JSON document (the message says why, quoting its start)."""


class DuplicateKey(NotJson):
    """A JSON object that names a key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"has duplicate key {key!r}")
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def _constant(word: str) -> float:
    raise ValueError(f"{word} is not a JSON number")


def loads(text: str) -> JsonValue:
    """``text`` as one JSON document; ``NotJson`` (``DuplicateKey``) when it is not one."""
    try:
        value: JsonValue = json.loads(text, object_pairs_hook=_object, parse_constant=_constant)
    except DuplicateKey:
        raise
    except RecursionError:
        raise NotJson("is not JSON: nested too deep") from None
    except ValueError as e:  # JSONDecodeError, a constant, an integer too long
        why = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
        raise NotJson(f"is not JSON ({why}): {quote(text)}") from None
    return value


class WrongShape(ValueError):
    """A JSON path that asks a field of what is no object, or an index of what is no array:
    the document does not say whether the value is there."""


def find(document: JsonValue, path: str) -> tuple[bool, JsonValue]:
    """``(True, value)`` at ``path``; ``(False, None)`` where an object has no such key or an
    array no such index (the value is absent); ``WrongShape`` where a step meets anything
    else (``$.pending`` of ``502``, of ``null``, of an HTML page read as text)."""
    value, walked = document, "$"
    for part in jsonpath.parse(path):
        want, ok = ("an array", isinstance(value, list)) if isinstance(part, int) else (
            "an object", isinstance(value, dict))
        if not ok:
            raise WrongShape(f"{path}: {walked} is {kind(value)}, not {want}")
        if isinstance(value, list) and isinstance(part, int):
            if not -len(value) <= part < len(value):
                return False, None
            value, walked = value[part], f"{walked}[{part}]"
        elif isinstance(value, dict) and isinstance(part, str):
            if part not in value:
                return False, None
            value, walked = value[part], f"{walked}.{part}"
    return True, value


def kind(value: object) -> str:
    """What ``value`` is, in JSON's words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if _number(value):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def quote(text: str) -> str:
    """The start of ``text``, to name it in an error."""
    return repr(text[:SHOWN] + "..." if len(text) > SHOWN else text)


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def same(a: JsonValue, b: JsonValue) -> bool:
    """``a`` and ``b`` are the same JSON value: a boolean only equals a boolean, numbers
    compare as numbers (``1.0`` is ``1``), strings, null, arrays and objects by these rules,
    element by element and key by key."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _number(a) or _number(b):
        return _number(a) and _number(b) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, list) or isinstance(b, list):
        return (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
                and all(same(x, y) for x, y in zip(a, b, strict=True)))
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
                and all(same(a[k], b[k]) for k in a))
    return a is None and b is None


def contains(value: JsonValue, want: JsonValue) -> bool:
    """A string holds ``want`` as text, an array as an element (``same``), an object as a
    key; nothing else holds anything."""
    if isinstance(value, str):
        return isinstance(want, str) and want in value
    if isinstance(value, list):
        return any(same(v, want) for v in value)
    if isinstance(value, dict):
        return isinstance(want, str) and want in value
    return False
