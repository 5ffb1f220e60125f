"""Whether an error means the system did not answer at all: down, unreachable, not accepting
connections, or silent past its timeout. "No" from a system is an answer; no system is not,
and a step waits for it (``workflows.probing``: the outage patience) instead of re-planning
around it: a new plan would meet the same outage."""

from __future__ import annotations

import psycopg
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError
from psycopg_pool import PoolTimeout

# SQLSTATE class 08 (connection exception), and a server shutting down or starting up
_PG_DOWN = ("08", "57P01", "57P02", "57P03")
# the session ended by Postgres after the client went quiet in a transaction (world.clients)
_PG_QUIET = "25P03"


def unreachable(e: BaseException) -> bool:
    """``e``, or what caused it (a tool error raised ``from`` a client's error), is the system
    not answering."""
    cause: BaseException | None = e
    for _ in range(8):
        if cause is None:
            return False
        if _no_answer(cause):
            return True
        cause = cause.__cause__
    return False


def _no_answer(e: BaseException) -> bool:
    if isinstance(e, PoolTimeout):
        return True
    if isinstance(e, psycopg.errors.IdleInTransactionSessionTimeout):
        return e.sqlstate == _PG_QUIET
    if isinstance(e, psycopg.OperationalError):
        state = e.sqlstate
        # no SQLSTATE: the client never got an answer (refused, reset, lost)
        return state is None or state.startswith(_PG_DOWN)
    if isinstance(e, BotoConnectionError | HTTPClientError):
        return True  # refused, reset, connect and read timeouts
    if isinstance(e, ClientError):
        status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        return status in (502, 503, 504)
    return isinstance(e, ConnectionError | TimeoutError)
