"""Statements ``warehouse.run_sql`` may run: written here by the operator, chosen by name in a
plan. Identifiers go through ``psycopg.sql.Identifier``, values through ``sql.Literal``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from pydantic import BaseModel, ConfigDict

from activities.pg import ident
from plans.names import Identifier, QualifiedName


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


class JobParams(Params):
    job_id: str
    state: str


@dataclass(frozen=True)
class Statement:
    params: type[Params]
    build: Callable[[Any], sql.Composable]


STATEMENTS: dict[str, Statement] = {
    "select_one": Statement(NoParams, lambda p: sql.SQL("SELECT 1")),
    "analyze": Statement(TableParams, lambda p: sql.SQL("ANALYZE {}").format(ident(p.table))),
    "create_index": Statement(
        IndexParams,
        lambda p: sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ({})").format(
            sql.Identifier(p.name), ident(p.table), sql.Identifier(p.column)
        ),
    ),
    "set_job_state": Statement(
        JobParams,
        lambda p: sql.SQL(
            "INSERT INTO plangate_jobs (job_id, state) VALUES ({}, {}) "
            "ON CONFLICT (job_id) DO UPDATE SET state = EXCLUDED.state, updated_at = now()"
        ).format(sql.Literal(p.job_id), sql.Literal(p.state)),
    ),
}
