"""How one variable is read from an environment mapping: one function per kind of value. An
empty value counts as unset; a value that cannot be used is a ``ConfigurationError`` of one
line that names the variable. The mapping is always an argument: nothing here reads
``os.environ`` (the CLI, the worker's assembly and the dev stack pass it)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from plangate.errors import ConfigurationError

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def text(env: Mapping[str, str], name: str) -> str | None:
    """The value of ``name``, None when unset or empty."""
    return env.get(name) or None


def stripped(env: Mapping[str, str], name: str) -> str | None:
    """The value of ``name`` without surrounding blanks, None when that leaves nothing."""
    return (env.get(name) or "").strip() or None


def flag(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    """A yes/no variable: ``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off``
    (any case); unset or empty: ``default``."""
    value = (env.get(name) or "").strip().lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigurationError(
        f"{name} must be 1 or 0 (true/false, yes/no, on/off), not {value!r}"
    )


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(raw: str, what: str) -> float:
    """Seconds from ``90``, ``90s``, ``15m``, ``8h`` or ``2d``; a clear error otherwise."""
    m = _DURATION.match(raw)
    if m is None or float(m.group(1)) <= 0:
        raise ConfigurationError(f"{what}: {raw!r} is not a duration (90s, 15m, 8h, 2d)")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def duration(env: Mapping[str, str], name: str, default: str) -> float:
    """A duration variable (``parse_duration``), ``default`` when unset."""
    return parse_duration(env.get(name) or default, name)


def at_least(env: Mapping[str, str], name: str, default: int, least: int) -> int:
    """A whole number of at least ``least`` (``_`` may group its digits)."""
    raw = (env.get(name) or "").strip().replace("_", "")
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < least:
        raise ConfigurationError(
            f"{name} must be a whole number of at least {least:,}, not {raw!r}"
        )
    return int(raw)


def optional(env: Mapping[str, str], name: str, parse: Callable[[str], str]) -> str | None:
    """``parse`` of the value of ``name``, stripped; None when unset."""
    raw = (env.get(name) or "").strip()
    return parse(raw) if raw else None


def entries(raw: str) -> list[tuple[int, str]]:
    """The non-empty entries of a comma-separated list, each with its position (from 1)."""
    return [(i, e) for i, e in enumerate((e.strip() for e in raw.split(",")), 1) if e]
