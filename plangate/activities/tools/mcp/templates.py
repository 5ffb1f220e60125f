"""The ``{arg}`` templates of the MCP servers file: how a server tool's arguments, and the values
a probe's judgement compares with, are built from a step's or a probe's own arguments.

A string that is exactly ``{name}`` takes the argument's value as it is (a list stays a list);
``{name}`` inside a longer string is replaced by the value as plain text. Nothing is evaluated:
a value that itself holds braces is never read as a template again, and an argument a longer
string needs but that was not given fails loudly, never becoming an empty string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from pydantic import JsonValue

_NAME = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class TemplateError(ValueError):
    """A template that names an argument not given."""


def names_in(template: JsonValue) -> set[str]:
    """Every argument ``template`` (a string, or lists and mappings of them) names."""
    if isinstance(template, str):
        return set(_NAME.findall(template))
    if isinstance(template, list):
        return set().union(*(names_in(t) for t in template)) if template else set()
    if isinstance(template, dict):
        return set().union(*(names_in(t) for t in template.values())) if template else set()
    return set()


def fill(template: JsonValue, values: Mapping[str, JsonValue]) -> JsonValue:
    """``template`` with each ``{name}`` replaced from ``values``."""
    if isinstance(template, str):
        whole = _NAME.fullmatch(template)
        if whole is not None:
            return _given(whole.group(1), values)
        return _NAME.sub(lambda m: _text(_given(m.group(1), values)), template)
    if isinstance(template, list):
        return [fill(t, values) for t in template]
    if isinstance(template, dict):
        return {k: fill(t, values) for k, t in template.items()}
    return template


def fill_arguments(
    template: Mapping[str, JsonValue], values: Mapping[str, JsonValue]
) -> dict[str, JsonValue]:
    """A tool's arguments from ``template``: a key whose whole template names an optional
    argument not given (None) is left out, so the server's own default applies."""
    out: dict[str, JsonValue] = {}
    for key, t in template.items():
        whole = _NAME.fullmatch(t) if isinstance(t, str) else None
        if whole is not None and values.get(whole.group(1)) is None:
            continue
        out[key] = fill(t, values)
    return out


def _given(name: str, values: Mapping[str, JsonValue]) -> JsonValue:
    value = values.get(name)
    if value is None:
        raise TemplateError(f"{{{name}}}: the argument {name!r} was not given")
    return value


def _text(value: JsonValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return value if isinstance(value, str) else str(value)
