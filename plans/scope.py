"""Where tools may write: plangate's own schema and the system catalogues never; beyond that,
the deployment's optional allow-lists (``PLANGATE_ALLOWED_BUCKETS``,
``PLANGATE_ALLOWED_SCHEMAS``: schemas, or ``schema.table`` for single tables).

A tool declares which of its arguments name what it writes (``Writes``); ``plangate check``
refuses a plan that writes outside the scope, and the tool activity refuses again at run time,
after ``${}`` binding (``out_of_scope``, 403: a person must look).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import JsonValue

from plans.bindings import arg_at

# plangate's own tables and the system catalogues: never a target of a tool's write.
PROTECTED_SCHEMAS = ("plangate", "pg_catalog", "information_schema")


@dataclass(frozen=True)
class Writes:
    """The step argument (``name`` or ``name.inner``) that names what a tool writes."""

    kind: Literal["bucket", "table"]
    arg: str
    when: Mapping[str, JsonValue] = field(default_factory=dict)  # only for calls with these args


@dataclass(frozen=True)
class Scope:
    buckets: tuple[str, ...] | None = None  # None: any bucket
    tables: tuple[str, ...] | None = None  # schemas or schema.table; None: any but protected
    # plangate's own buckets (the run artifacts of world.files): never a target
    protected_buckets: tuple[str, ...] = ()

    @classmethod
    def parse(cls, buckets: str | None, tables: str | None) -> Scope:
        def items(raw: str | None) -> tuple[str, ...] | None:
            if raw is None or not raw.strip():
                return None
            return tuple(x.strip().lower() for x in raw.split(",") if x.strip())

        return cls(items(buckets), items(tables))

    def refusal(self, kind: str, name: str) -> str | None:
        """Why writing ``name`` is out of scope, or None."""
        if kind == "bucket":
            if name.lower() in self.protected_buckets:
                return f"bucket {name} holds plangate's run artifacts, never a tool's target"
            if self.buckets is not None and name.lower() not in self.buckets:
                return f"bucket {name} is not in PLANGATE_ALLOWED_BUCKETS"
            return None
        qualified = name.lower() if "." in name else f"public.{name.lower()}"
        schema = qualified.split(".", 1)[0]
        if schema in PROTECTED_SCHEMAS or schema.startswith("pg_"):
            return f"{name}: schema {schema} is never a target tools may write"
        if self.tables is not None and not ({schema, qualified} & set(self.tables)):
            return f"{name} is not in PLANGATE_ALLOWED_SCHEMAS"
        return None


def targets(writes: tuple[Writes, ...], args: Mapping[str, Any]) -> Iterator[tuple[Writes, str]]:
    """Each declared write target these arguments name (strings only: an unresolved
    ``${name}`` is judged after binding)."""
    for w in writes:
        if any(arg_at(args, k) != v for k, v in w.when.items()):
            continue
        value = arg_at(args, w.arg)
        if isinstance(value, str) and "${" not in value:
            yield w, value
