"""Statements ``warehouse.run_sql`` may run: written here by the operator, chosen by name in a
plan. Identifiers go through ``psycopg.sql.Identifier``, values through ``sql.Literal``. Declared
here; each statement's SQL is built in ``_statements``, imported when ``run_sql`` first runs one:
a client that checks plans never loads psycopg.

A statement declares what it reads and writes (``plans.scope``: never plangate's own tables or
the system catalogues, only what the deployment's scope allows), the post conditions every use
of it ends with and the evidence that a use would change nothing; ``run_sql`` has no contract of
its own (it is too general), only its statements' ones."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from plangate.plans.catalogue import Term
from plangate.plans.names import Identifier, QualifiedName
from plangate.plans.scope import Reads, Writes


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoParams(Params):
    pass


class TableParams(Params):
    table: QualifiedName


class IndexParams(Params):
    name: Identifier
    table: QualifiedName
    column: Identifier


class SampleParams(Params):
    table: QualifiedName
    limit: int = Field(default=100, ge=1, le=100_000)


class JobParams(Params):
    job_id: str
    state: str


@dataclass(frozen=True)
class Statement:
    params: type[Params]
    # What every use of this statement ends with, and the evidence that a use would change
    # nothing (``Contract.done``), bound from ``params.NAME``; ``run_sql`` takes these as its
    # contract.
    post: tuple[Term, ...] = ()
    done: tuple[Term, ...] = ()
    writes: tuple[Writes, ...] = ()  # what it writes, from ``params.NAME`` (plans.scope)
    reads: tuple[Reads, ...] = ()  # what it reads, from ``params.NAME``


STATEMENTS: dict[str, Statement] = {
    "select_one": Statement(NoParams),
    # read-only: a look at a table's rows (run_sql returns at most its row and size bounds)
    "sample_rows": Statement(
        SampleParams,
        reads=(Reads("table", "params.table"),),
    ),
    "analyze": Statement(
        TableParams,
        writes=(Writes("table", "params.table"),),
    ),
    "create_index": Statement(
        IndexParams,
        # an index of that name may be an older one on other columns: checked, never skipped
        post=(Term("index_valid", {"name": "params.name"}),),
        writes=(Writes("table", "params.table"),),
    ),
    "set_job_state": Statement(
        JobParams,
        # a run's own job only (``_statements.SET_JOB``)
        writes=(Writes("job", "params.job_id"),),
        # Setting a state the job already has changes nothing. Not a post: others move a job
        # on (requested -> done), and a plan's own post says which state it waits for.
        done=(Term("job_state", {"job_id": "params.job_id", "want": "params.state"}),),
    ),
}
