"""Standing grants in Postgres (``records.grants``): ``plangate.grants``, each grant as its
approver signed it, and ``revoked_at`` once revoked; ``plangate.grant_uses``, one row per call a
grant covers, keyed by the call's idempotency key: ``reserved`` when the run's workflow found
the call covered (``grant.cover``), ``used`` when the tool's activity admitted it.

Every use is taken under the grant's row lock (``SELECT ... FOR UPDATE``), counting every use
row of the grant, reserved ones included (calls in flight): never more uses than granted. A
reserved use stays spent, whether or not its call acts (a run cancelled before its call gives
none back): the count errs towards fewer calls, never more. A revoked or expired grant covers no
new call and admits no reserved one at its call. Which run a use belongs to is what Temporal
says the activity is of (its workflow id), never what a request says."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from pydantic import JsonValue

from plangate.plans.amounts import Moves
from plangate.plans.words import many
from plangate.records.grants import (
    Grant,
    GrantSeen,
    GrantTerms,
    self_granted,
    signature_refusal,
    terms_refusal,
)
from plangate.world.clients import World
from plangate.world.errors import ToolError

GRANTS = sql.Identifier("plangate", "grants")
USES = sql.Identifier("plangate", "grant_uses")



@dataclass(frozen=True)
class Listed:
    """A grant as ``plangate grant list`` shows it."""

    grant: Grant
    used: int
    revoked_at: datetime | None
    revoked_by: str | None


async def store(world: World, grant: Grant) -> bool:
    """``grant`` kept (False: it was already, by its id)."""
    t = grant.terms
    q = sql.SQL(
        "INSERT INTO {} (grant_id, tool, principal, approver, uses, expires_at, terms, signature) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (grant_id) DO NOTHING"
    ).format(GRANTS)
    pool = await world.pool()
    async with pool.connection() as conn:
        cur = await conn.execute(q, (grant.grant_id, t.tool, t.principal, t.approver, t.uses,
                                     t.expires_at, Jsonb(t.model_dump(mode="json")),
                                     grant.signature))
        return bool(cur.rowcount == 1)


async def revoke(world: World, grant_id: str, by: str) -> datetime | None:
    """The grant revoked now (its time; None: no such grant). Revoked once: a second revoke
    returns the first's time."""
    q = sql.SQL("UPDATE {} SET revoked_at = coalesce(revoked_at, now()), "
                "revoked_by = coalesce(revoked_by, %s) WHERE grant_id = %s "
                "RETURNING revoked_at").format(GRANTS)
    pool = await world.pool()
    async with pool.connection() as conn:
        row = await (await conn.execute(q, (by, grant_id))).fetchone()
        return None if row is None else row[0]


async def listed(world: World, *, live_only: bool = False) -> list[Listed]:
    """Every grant (``live_only``: unrevoked, unexpired), newest first, with its uses taken."""
    q = sql.SQL(
        "SELECT g.terms, g.signature, g.revoked_at, g.revoked_by, "
        "(SELECT count(*) FROM {uses} u WHERE u.grant_id = g.grant_id) "
        "FROM {grants} g {where} ORDER BY g.issued_at DESC, g.grant_id"
    ).format(uses=USES, grants=GRANTS, where=sql.SQL(
        "WHERE g.revoked_at IS NULL AND g.expires_at > now()" if live_only else ""))
    pool = await world.pool()
    async with pool.connection() as conn:
        rows = await (await conn.execute(q)).fetchall()
    return [Listed(Grant(terms=GrantTerms.model_validate(r[0]), signature=r[1]), int(r[4]),
                   r[2], r[3]) for r in rows]


@dataclass(frozen=True)
class Call:
    """A call as the worker knows it: its run (Temporal's word), key, tool, principal and
    fully bound arguments (with their digest)."""

    workflow_id: str
    key: str
    tool: str
    principal: str | None
    args: Mapping[str, JsonValue]
    args_sha256: str
    info: Moves | None
    submitter: str | None = None  # who submitted the run (verified), and their key
    submitter_key: bytes | None = None


async def _now(conn: psycopg.AsyncConnection[Any]) -> datetime:
    row = await (await conn.execute("SELECT now()")).fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]  # psycopg's rows are untyped tuples


def _refusal(grant: Grant, call: Call, approvers: Mapping[str, bytes], now: datetime
             ) -> str | None:
    """Why ``grant`` does not cover ``call`` now: not an approver's of this deployment, the
    call outside its terms, or its approver the run's submitter."""
    t = grant.terms
    return (signature_refusal(grant, approvers)
            or terms_refusal(t, call.tool, call.principal, call.info, call.args, now)
            or self_granted(t, approvers, call.submitter, call.submitter_key))


async def reserve(world: World, call: Call, approvers: Mapping[str, bytes]) -> tuple[Grant, str]:
    """One use of a live grant that covers ``call``, reserved for its key: the grant, or
    raises ``NotCovered`` saying why none does. A key that holds a reservation already keeps
    it (its arguments as now: a new read's version), taking no second use."""
    pool = await world.pool()
    why = f"no live grant of {call.tool} for {call.principal or 'nobody'}"
    async with pool.connection() as conn:
        async with conn.transaction():
            found = await (await conn.execute(sql.SQL(
                "SELECT grant_id FROM {} WHERE tool = %s AND principal = %s "
                "AND revoked_at IS NULL AND expires_at > now() ORDER BY expires_at, grant_id"
            ).format(GRANTS), (call.tool, call.principal or ""))).fetchall()
        for (grant_id,) in found:
            async with conn.transaction():
                taken = await _take(conn, call, grant_id, approvers)
            if isinstance(taken, tuple):
                return taken
            why = taken
    raise NotCovered(why)


class NotCovered(Exception):
    """No grant covers the call: why (the last grant's reason, or that there is none)."""


async def _take(conn: psycopg.AsyncConnection[Any], call: Call, grant_id: str,
                approvers: Mapping[str, bytes]) -> tuple[Grant, str] | str:
    """Under the grant's lock: the grant and its id if it covers the call and has a use left
    (the use reserved), else why not."""
    row = await (await conn.execute(sql.SQL(
        "SELECT terms, signature, revoked_at, expires_at > now() FROM {} WHERE grant_id = %s "
        "FOR UPDATE").format(GRANTS), (grant_id,))).fetchone()
    if row is None or row[2] is not None or not row[3]:
        return f"grant {grant_id[:12]} was revoked or expired"
    grant = Grant(terms=GrantTerms.model_validate(row[0]), signature=row[1])
    why = _refusal(grant, call, approvers, await _now(conn))
    if why is not None or grant.grant_id != grant_id:
        return why or f"grant {grant_id[:12]}: its terms are not its id's"
    mine = await (await conn.execute(sql.SQL(
        "SELECT grant_id, workflow_id FROM {} WHERE idempotency_key = %s FOR UPDATE"
    ).format(USES), (call.key,))).fetchone()
    if mine is not None and mine[1] != call.workflow_id:
        return "the call's key holds another run's use"
    if mine is not None and mine[0] == grant_id:  # this call's use already
        await conn.execute(sql.SQL("UPDATE {} SET args_sha256 = %s WHERE idempotency_key = %s"
                                   ).format(USES), (call.args_sha256, call.key))
        return grant, grant_id
    counted = await (await conn.execute(sql.SQL(
        "SELECT count(*) FROM {} WHERE grant_id = %s").format(USES), (grant_id,))).fetchone()
    if counted is None or int(counted[0]) >= grant.terms.uses:
        return (f"grant {grant_id[:12]}: no use left ({many(grant.terms.uses, 'use')}, "
                "all taken)")
    await conn.execute(sql.SQL(
        "INSERT INTO {} (idempotency_key, grant_id, workflow_id, args_sha256, state) "
        "VALUES (%s, %s, %s, %s, 'reserved') ON CONFLICT (idempotency_key) DO UPDATE SET "
        "grant_id = excluded.grant_id, args_sha256 = excluded.args_sha256, "
        "reserved_at = now()").format(USES),
        (call.key, grant_id, call.workflow_id, call.args_sha256))
    return grant, grant_id


async def consume(world: World, call: Call, approvers: Mapping[str, bytes]) -> GrantSeen | None:
    """At the call: the use reserved for this very call (its key, its run, its arguments)
    consumed, the grant verified again (live, signed by an approver listed now, the call inside
    its terms); None where the key holds no use of this run. A use that no longer holds raises
    ``grant_revoked`` (403): nothing is called."""
    pool = await world.pool()
    async with pool.connection() as conn, conn.transaction():
        use = await (await conn.execute(sql.SQL(
            "SELECT grant_id, workflow_id, args_sha256 FROM {} WHERE idempotency_key = %s"
        ).format(USES), (call.key,))).fetchone()
        if use is None or use[1] != call.workflow_id:
            return None
        grant_id = use[0]
        row = await (await conn.execute(sql.SQL(
            "SELECT terms, signature, revoked_at, expires_at > now() FROM {} "
            "WHERE grant_id = %s FOR UPDATE").format(GRANTS), (grant_id,))).fetchone()
        assert row is not None  # the foreign key
        if row[2] is not None:
            raise ToolError("grant_revoked", f"not called: grant {grant_id[:12]} was revoked at "
                            f"{row[2].isoformat()}, after it covered this call",
                            {"grant_id": grant_id})
        if not row[3]:
            raise ToolError("grant_revoked", f"not called: grant {grant_id[:12]} expired before "
                            "this call", {"grant_id": grant_id})
        grant = Grant(terms=GrantTerms.model_validate(row[0]), signature=row[1])
        why = _refusal(grant, call, approvers, await _now(conn))
        if why is None and use[2] != call.args_sha256:
            why = "the call's arguments are not those the grant's use was reserved for"
        if why is not None:
            raise ToolError("grant_revoked", f"not called: {why}", {"grant_id": grant_id})
        await conn.execute(sql.SQL(
            "UPDATE {} SET state = 'used', used_at = coalesce(used_at, now()) "
            "WHERE idempotency_key = %s").format(USES), (call.key,))
        before = await (await conn.execute(sql.SQL(
            "SELECT count(*) FROM {} WHERE grant_id = %s AND idempotency_key <> %s"
        ).format(USES), (grant_id, call.key))).fetchone()
    return GrantSeen(id=grant_id, approver=grant.terms.approver, uses=grant.terms.uses,
                     used=int(before[0]) if before else 0)
