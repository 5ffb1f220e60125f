"""A small, safe JSON path: ``$``, ``.name``, ``[index]`` and ``['name']``. Nothing is evaluated."""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(-?\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")


class PathError(ValueError):
    """A JSON path that is malformed, or that does not lead to a value."""


def parse(path: str) -> list[str | int]:
    if not path.startswith("$"):
        raise PathError(f"JSON path {path!r} must start with '$'")
    parts: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if m is None:
            raise PathError(f"JSON path {path!r} is malformed at position {pos}")
        name, index, quoted1, quoted2 = m.groups()
        if index is not None:
            parts.append(int(index))
        else:
            parts.append(next(p for p in (name, quoted1, quoted2) if p is not None))
        pos = m.end()
    return parts


def get(document: Any, path: str) -> Any:
    """The value at ``path``; ``PathError`` when it is not there (never a default)."""
    value = document
    for part in parse(path):
        if isinstance(part, int):
            if not isinstance(value, list) or not -len(value) <= part < len(value):
                raise PathError(f"{path}: no index {part}")
            value = value[part]
        else:
            if not isinstance(value, dict) or part not in value:
                raise PathError(f"{path}: no field {part!r}")
            value = value[part]
    return value
