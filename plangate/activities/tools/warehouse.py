"""Warehouse tools on Postgres: ``warehouse.load`` (CSV with COPY) and ``warehouse.run_sql``.

``run_sql`` runs a *named* statement the operator registered in ``statements``; a plan chooses
the name and the parameters, never the SQL text. The declarations are here; what each tool
does is in ``_warehouse``, imported on its first call: a client that checks plans never loads
psycopg.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import Field, JsonValue, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from plangate.activities.tools.registry import CallContext, ToolArgs, tool
from plangate.activities.tools.statements import STATEMENTS
from plangate.plans.catalogue import Contract, Term
from plangate.plans.model import Effect
from plangate.plans.names import NonEmpty, QualifiedName
from plangate.plans.scope import Writes

if TYPE_CHECKING:
    from plangate.world.clients import World


class LoadArgs(ToolArgs):
    target: QualifiedName
    source: NonEmpty
    # Fused condition: fewer rows than this roll the load back instead of committing.
    min_rows: int | None = Field(default=None, ge=0)


class RunSqlArgs(ToolArgs):
    """A registered statement's name and its parameters, checked against the statement's own
    parameter model: at ``check`` (unless the parameters hold a ``${name}`` that binds later)
    and again by the tool after binding, so a bad name or parameter is ``bad_arguments``."""

    statement: str
    params: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("statement")
    @classmethod
    def _registered(cls, v: str) -> str:
        if v not in STATEMENTS:
            raise PydanticCustomError(
                "unknown_statement",
                "no registered statement {name} (known: {known})",
                {"name": repr(v), "known": ", ".join(sorted(STATEMENTS))},
            )
        return v

    @field_validator("params")
    @classmethod
    def _fit_the_statement(
        cls, v: dict[str, JsonValue], info: ValidationInfo
    ) -> dict[str, JsonValue]:
        stmt = STATEMENTS.get(info.data.get("statement", ""))
        if stmt is None:
            return v  # the statement's own error says it all
        # Its errors come out under this field: args.params.<field>.
        stmt.params.model_validate(v)
        return v


def _statement_contract() -> Contract:
    def each(terms: str) -> tuple[Term, ...]:
        return tuple(
            replace(t, when={"statement": name})
            for name, stmt in STATEMENTS.items()
            for t in getattr(stmt, terms)
        )

    return Contract(post=each("post"), done=each("done"))


@tool(
    "warehouse.load",
    LoadArgs,
    Effect.WRITE,
    Contract(
        post=(
            Term("table_rowcount", {"table": "target"}, {"min": 1}),
            # The content this call was asked to load, not merely "some rows": a table still
            # holding last month's rows is never this month's load already done.
            Term("table_loaded_from", {"table": "target", "source": "source"}, identifies=True),
        )
    ),
    writes=(Writes("table", "target"),),
)
async def warehouse_load(
    args: LoadArgs, world: World, call: CallContext
) -> dict[str, JsonValue]:
    """Loads the CSV file ``source`` (in the work directory) into the table ``target``
    (schema.table), replacing its rows; fewer than ``min_rows`` rows roll the load back."""
    from plangate.activities.tools import _warehouse

    return await _warehouse.warehouse_load(args, world, call)


@tool(
    "warehouse.run_sql",
    RunSqlArgs,
    Effect.WRITE,
    _statement_contract(),
    writes=tuple(
        replace(w, when={"statement": name}) for name, stmt in STATEMENTS.items()
        for w in stmt.writes
    ),
    reads=tuple(
        replace(r, when={"statement": name}) for name, stmt in STATEMENTS.items()
        for r in stmt.reads
    ),
)
async def warehouse_run_sql(
    args: RunSqlArgs, world: World, call: CallContext
) -> dict[str, JsonValue]:
    """Runs one of the deployment's registered statements (``statement``) with its
    parameters (``params``), bound, never SQL text from the caller."""
    from plangate.activities.tools import _warehouse

    return await _warehouse.warehouse_run_sql(args, world, call)
