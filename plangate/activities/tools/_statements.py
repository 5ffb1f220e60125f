"""The SQL of each statement ``warehouse.run_sql`` may run (declared in
``plangate.activities.tools.statements``): from its parameters, checked by their model, and the
id of the run it is for. Identifiers through ``psycopg.sql.Identifier``, values through
``sql.Literal``; nothing a plan wrote is ever SQL text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg import sql

from plangate.world.pg import ident

# A run's own jobs: a plan sets only the job of its own run (owner), never an outside job
# (owner NULL) or another run's, so no run can satisfy another's job_state wait.
SET_JOB = """
INSERT INTO plangate.jobs (job_id, state, owner) VALUES ({}, {}, {})
ON CONFLICT (owner, job_id) DO UPDATE SET state = EXCLUDED.state, updated_at = now()
"""

Build = Callable[[Any, str], sql.SQL | sql.Composed]

BUILDS: dict[str, Build] = {
    "select_one": lambda p, run: sql.SQL("SELECT 1"),
    "sample_rows": lambda p, run: sql.SQL("SELECT * FROM {} LIMIT {}").format(
        ident(p.table), sql.Literal(p.limit)
    ),
    "analyze": lambda p, run: sql.SQL("ANALYZE {}").format(ident(p.table)),
    "create_index": lambda p, run: sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ({})").format(
        sql.Identifier(p.name), ident(p.table), sql.Identifier(p.column)
    ),
    "set_job_state": lambda p, run: sql.SQL(SET_JOB).format(
        sql.Literal(p.job_id), sql.Literal(p.state), sql.Literal(run)
    ),
}
