"""Postgres helpers shared by tools and probes: identifiers and error mapping."""

from __future__ import annotations

import psycopg
from psycopg import sql
from psycopg_pool import PoolTimeout

from plans.names import split_qualified
from world.errors import ToolError


def ident(name: str) -> sql.Identifier:
    """``schema.table`` or ``table`` as a quoted identifier; never string-formatted into SQL."""
    return sql.Identifier(*split_qualified(name))


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
