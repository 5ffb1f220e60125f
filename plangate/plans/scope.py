"""What a plan may reach: plangate's own schema and the system catalogues never, for reading or
writing; beyond that, the deployment's optional allow-lists (``PLANGATE_ALLOWED_BUCKETS``,
``PLANGATE_ALLOWED_SCHEMAS``: schemas, or ``schema.table`` for single tables).

A tool declares what it writes (``Writes``) and which of its arguments name what it reads
(``Reads``); a probe, which arguments name what it reads. ``plangate check`` refuses a plan that
reaches outside the scope, and the tool and probe activities refuse again at run time, after
``${}`` binding (``out_of_scope``, 403: a person must look).

Names are compared exactly as the SQL uses them: ``psycopg.sql.Identifier`` quotes, so
``STAGING.x`` is schema ``STAGING``, never ``staging``; an unqualified table is ``public.<name>``
(``world.pg.ident`` qualifies it so). The protected schemas are refused in any case.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import JsonValue

from plangate.plans.bindings import arg_at

# plangate's own tables and the system catalogues: never read or written by a plan.
PROTECTED_SCHEMAS = ("plangate", "pg_catalog", "information_schema")
DEFAULT_SCHEMA = "public"

# "job": a job of the run's own (``set_job_state``, ``job_state``): scoped by run where it is
# stored, so no name is out of scope.
Kind = Literal["bucket", "table", "job"]


@dataclass(frozen=True)
class Names:
    """What a tool or probe touches: the step argument ``arg`` (``name`` or ``name.inner``)
    names it, or it is always the fixed ``name`` (a demo system's own table)."""

    kind: Kind
    arg: str = ""
    when: Mapping[str, JsonValue] = field(default_factory=dict)  # only for calls with these args
    name: str | None = None

    def __post_init__(self) -> None:
        if bool(self.arg) == (self.name is not None):
            raise ValueError("give exactly one of arg and name")

    def where(self, prefix: str) -> str:
        """The field a plan names it in: ``<prefix>.<arg>``; a fixed name, the tool."""
        return f"{prefix}.{self.arg}" if self.arg else "tool"


@dataclass(frozen=True)
class Writes(Names):
    """What a tool writes."""


@dataclass(frozen=True)
class Reads(Names):
    """What a tool or probe reads, where a plan chooses it."""


def table_parts(name: str) -> tuple[str, str]:
    """``schema.table`` or ``table`` as (schema, table), exactly as the SQL will use them."""
    schema, _, table = name.partition(".")
    return (schema, table) if table else (DEFAULT_SCHEMA, schema)


def protected_schema(schema: str) -> bool:
    # in any case: ``PLANGATE.x`` names no table of plangate's, but is refused all the same
    folded = schema.lower()
    return folded in PROTECTED_SCHEMAS or folded.startswith("pg_")


@dataclass(frozen=True)
class Scope:
    buckets: tuple[str, ...] | None = None  # None: any bucket
    tables: tuple[str, ...] | None = None  # schemas or schema.table; None: any but protected
    # plangate's own buckets (the run artifacts of world.files): never read or written
    protected_buckets: tuple[str, ...] = ()

    @classmethod
    def parse(cls, buckets: str | None, tables: str | None) -> Scope:
        def items(raw: str | None) -> tuple[str, ...] | None:
            if raw is None or not raw.strip():
                return None
            return tuple(x.strip() for x in raw.split(",") if x.strip())

        return cls(items(buckets), items(tables))

    def refusal(self, kind: Kind, name: str, *, read: bool = False) -> str | None:
        """Why reading (``read``) or writing ``name`` is out of scope, or None."""
        never = "never readable by a plan" if read else "never a target tools may write"
        if kind == "job":
            return None
        if kind == "bucket":
            if name in self.protected_buckets:
                return f"bucket {name} holds plangate's run artifacts, {never}"
            if self.buckets is not None and name not in self.buckets:
                return f"bucket {name} is not in PLANGATE_ALLOWED_BUCKETS"
            return None
        schema, table = table_parts(name)
        if protected_schema(schema):
            return f"{name}: schema {schema} is {never}"
        if self.tables is not None and not ({schema, f"{schema}.{table}"} & set(self.tables)):
            return f"{name} is not in PLANGATE_ALLOWED_SCHEMAS{self._case_hint(schema)}"
        return None

    def _case_hint(self, schema: str) -> str:
        near = [t for t in self.tables or () if t.split(".")[0].lower() == schema.lower()]
        if not near:
            return ""
        return f" (schema {schema!r} is not {near[0].split('.')[0]!r}: names are exact)"


def targets(
    names: tuple[Names, ...], args: Mapping[str, Any], *, bound: bool = False
) -> Iterator[tuple[Names, Any]]:
    """Each declared name these arguments give. Before binding, strings only (an unresolved
    ``${name}`` is judged after binding); ``bound``: every value given, whatever it holds."""
    for n in names:
        if any(arg_at(args, k) != v for k, v in n.when.items()):
            continue
        value = n.name if n.name is not None else arg_at(args, n.arg)
        if value is None:
            continue
        if bound or (isinstance(value, str) and "${" not in value):
            yield n, value


def refusals(
    scope: Scope,
    args: Mapping[str, Any],
    reads: tuple[Names, ...] = (),
    writes: tuple[Names, ...] = (),
    *,
    bound: bool = False,
) -> Iterator[tuple[Names, str]]:
    """Each read or write these arguments name that is out of ``scope``, and why."""
    for declared, read in ((writes, False), (reads, True)):
        for n, value in targets(declared, args, bound=bound):
            if not isinstance(value, str):
                yield n, f"{n.arg} names no {n.kind}: it holds a {type(value).__name__}"
                continue
            why = scope.refusal(n.kind, value, read=read)
            if why is not None:
                yield n, why
