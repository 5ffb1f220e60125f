"""Postgres helpers shared by tools and probes: identifiers and error mapping."""

from __future__ import annotations

import psycopg
from psycopg import sql
from psycopg_pool import PoolTimeout

from activities.errors import ToolError
from plans.names import split_qualified


def ident(name: str) -> sql.Identifier:
    """``schema.table`` or ``table`` as a quoted identifier; never string-formatted into SQL."""
    return sql.Identifier(*split_qualified(name))


# plangate's own tables and the system catalogues: never a target of a tool's write.
PROTECTED_SCHEMAS = ("plangate", "pg_catalog", "information_schema")


def refuse_own_table(name: str) -> None:
    schema = name.split(".", 1)[0].lower() if "." in name else "public"
    if schema in PROTECTED_SCHEMAS or schema.startswith("pg_"):
        raise ToolError("out_of_scope", f"{name}: schema {schema} is not a target tools may write")


def to_tool_error(e: Exception, what: str) -> ToolError:
    if isinstance(e, PoolTimeout | psycopg.OperationalError):
        return ToolError("unavailable", f"{what}: {e}")
    if isinstance(e, psycopg.errors.InsufficientPrivilege):
        return ToolError("authority_revoked", f"{what}: {e}")
    if isinstance(e, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedColumn):
        return ToolError("not_found", f"{what}: {e}")
    if isinstance(e, psycopg.errors.SerializationFailure | psycopg.errors.DeadlockDetected):
        return ToolError("unavailable", f"{what}: {e}")
    return ToolError("invalid_state", f"{what}: {type(e).__name__}: {e}")
