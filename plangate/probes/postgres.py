"""Postgres probes: catalogue reads and small aggregates, identifiers never formatted as text.

What a plan names them to read is scoped (``plans.scope``). They read as the worker's own role,
whoever the run acts for: a probe only reads, and the authority of the run's principal
(``on_behalf_of``) is re-checked by the tool when it acts (``world.pg.act_as``).

The declarations are here; what each probe does is in ``_postgres``, imported on its first
read: a client that checks plans never loads psycopg."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from plangate.plans.names import Identifier, NonEmpty, QualifiedName
from plangate.plans.scope import Reads
from plangate.probes.registry import ProbeArgs, ProbeContext, Verdict, probe

if TYPE_CHECKING:
    from plangate.world.clients import World


class RowcountArgs(ProbeArgs):
    table: QualifiedName
    min: int = Field(default=1, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _range(self) -> RowcountArgs:
        if self.max is not None and self.max < self.min:
            raise ValueError("max is below min")
        return self


class ColumnArgs(ProbeArgs):
    table: QualifiedName
    column: Identifier


class IndexArgs(ProbeArgs):
    name: QualifiedName


class LoadedFromArgs(ProbeArgs):
    table: QualifiedName
    source: NonEmpty


class JobArgs(ProbeArgs):
    job_id: NonEmpty
    want: NonEmpty


# What a plan names a probe to read is scoped like a tool's reads (plans.scope); plangate.loads,
# which table_loaded_from reads by design, is not a plan's to name.
TABLE = (Reads("table", "table"),)


@probe("table_rowcount", RowcountArgs, system="postgres", reads=TABLE)
async def table_rowcount(args: RowcountArgs, world: World, ctx: ProbeContext) -> Verdict:
    from plangate.probes import _postgres

    return await _postgres.table_rowcount(args, world, ctx)


@probe("table_loaded_from", LoadedFromArgs, system="postgres", reads=TABLE)
async def table_loaded_from(args: LoadedFromArgs, world: World, ctx: ProbeContext) -> Verdict:
    """The table holds what a load of ``source`` put there: the load recorded this source's
    SHA-256 and row count, and the table still has exactly that many rows."""
    from plangate.probes import _postgres

    return await _postgres.table_loaded_from(args, world, ctx)


@probe("column_exists", ColumnArgs, system="postgres", reads=TABLE)
async def column_exists(args: ColumnArgs, world: World, ctx: ProbeContext) -> Verdict:
    from plangate.probes import _postgres

    return await _postgres.column_exists(args, world, ctx)


@probe("index_valid", IndexArgs, system="postgres")
async def index_valid(args: IndexArgs, world: World, ctx: ProbeContext) -> Verdict:
    from plangate.probes import _postgres

    return await _postgres.index_valid(args, world, ctx)


@probe("job_state", JobArgs, system="postgres", reads=(Reads("job", "job_id"),))
async def job_state(args: JobArgs, world: World, ctx: ProbeContext) -> Verdict:
    from plangate.probes import _postgres

    return await _postgres.job_state(args, world, ctx)
