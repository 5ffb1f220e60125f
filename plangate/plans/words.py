"""A count with its noun, singular for one: ``many(1, "row")`` is ``1 row``, ``many(0, "row")``
``0 rows`` (never "1 rows" in a line plangate prints)."""

from __future__ import annotations


def many(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
