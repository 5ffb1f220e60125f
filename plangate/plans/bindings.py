"""``${name}`` references in step arguments, resolved from earlier steps' bindings.

A whole-string reference takes the bound value with its type; a reference inside a longer string
is interpolated. A reference that cannot be resolved raises; it never becomes an empty value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_WHOLE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


class BindingError(ValueError):
    """A ``${name}`` that no completed step bound."""

    def __init__(self, name: str, where: str) -> None:
        super().__init__(f"{where}: ${{{name}}} is not bound by any completed step")
        self.name = name
        self.where = where


def references(value: Any) -> Iterator[str]:
    """Every name referenced anywhere inside ``value``."""
    if isinstance(value, str):
        yield from REF.findall(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from references(v)
    elif isinstance(value, list):
        for v in value:
            yield from references(v)


def resolve(value: Any, bound: Mapping[str, Any], where: str = "args", strict: bool = True) -> Any:
    """``value`` with its references resolved. Not ``strict``: a reference ``bound`` cannot
    answer is left as written (to compare two steps' arguments before every name is bound)."""
    if isinstance(value, str):
        whole = _WHOLE.match(value)
        if whole and (strict or whole.group(1) in bound):
            name = whole.group(1)
            if name not in bound:
                raise BindingError(name, where)
            return bound[name]

        def _sub(m: re.Match[str]) -> str:
            if m.group(1) in bound:
                return str(bound[m.group(1)])
            if strict:
                raise BindingError(m.group(1), where)
            return m.group(0)

        return REF.sub(_sub, value)
    if isinstance(value, dict):
        return {k: resolve(v, bound, f"{where}.{k}", strict) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, bound, f"{where}[{i}]", strict) for i, v in enumerate(value)]
    return value



def arg_at(args: Mapping[str, Any], path: str) -> Any:
    """``name`` or ``name.inner``: a step argument, or a field inside one; None when absent."""
    value: Any = args
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value
