"""The effect ledger: plangate's own record of every effect it causes, ``plangate.effects``.

One row per tool call of effect ``write``, ``external`` or ``money``, keyed by the call's
idempotency key, written by the tool's activity and never by a plan; and one per file a call
wrote in its run's directory (``local_write``: ``s3.get``'s download, a read towards S3 but a
write here), recorded done once written, never answered from and no part of the totals. A
call's intent commits before the tool acts, its outcome after; where the tool acts in the
deployment's Postgres (``world.pg.tool_transaction``) the outcome commits in the effect's own
transaction (``in_effect``), so there is no instant at which one is in the world and not the other.

A row's state:

- ``intent``: the call was about to act (or is acting); no outcome is known;
- ``done``: it acted; ``output`` is what it returned (NULL where the outcome committed with the
  effect and the process died before the answer was written);
- ``failed``: it raised a failure that leaves nothing behind (it certainly did not act);
- ``unknown``: it raised a failure after which it may have acted.

A key already ``done`` is answered from here and the tool is not called again; an ``intent``
or ``unknown`` key is the caller's to resolve (``activities.effects``). An approval's card is
consumed by the first effect that carries it (a unique index on ``card_digest``).

Running totals (``LedgerTotals``, in the tool's amount units; ``in_cents`` gives the
policies' ``records.policy.Totals``): what a principal's effects add up to in the last hour and day,
calls in flight (``intent``) and those that may have acted (``unknown``) included, failed ones
not. ``begin`` with a ``gate`` decides a new call against them under a lock per principal, in
the transaction that records its intent: calls of one principal are admitted one at a time,
each seeing every call admitted before it, so a limit holds under concurrency.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import PoolTimeout
from pydantic import JsonValue

from plangate.records.policy import Totals
from plangate.world import pg
from plangate.world.clients import World
from plangate.world.errors import ToolError
from plangate.world.policies.schema import cents

DETAIL_MAX = 500


class State(StrEnum):
    INTENT = "intent"
    DONE = "done"
    FAILED = "failed"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Intent:
    """What a call is about to do, as its activity knows it (never as a plan says it)."""

    key: str
    run_id: str
    step: int
    plan_version: int
    tool: str
    args_sha256: str
    effect: str
    principal: str | None = None
    amount: Decimal | None = None
    card_digest: str | None = None
    approver: str | None = None
    resource: str | None = None  # what it names, ``kind:name`` (a policy's totals by resource)


@dataclass(frozen=True, kw_only=True)
class Entry(Intent):
    """A row of the ledger: the intent, and what became of it."""

    state: State
    attempts: int
    output: dict[str, JsonValue] | None
    detail: str
    intent_at: datetime
    outcome_at: datetime | None

    def as_json(self) -> dict[str, JsonValue]:
        return {
            "idempotency_key": self.key, "run_id": self.run_id, "step": self.step,
            "plan_version": self.plan_version, "tool": self.tool,
            "args_sha256": self.args_sha256, "effect": self.effect,
            "principal": self.principal,
            "amount": None if self.amount is None else str(self.amount),
            "card_digest": self.card_digest, "approver": self.approver,
            "resource": self.resource, "state": self.state.value, "attempts": self.attempts,
            "output": self.output,
            "detail": self.detail, "intent_at": self.intent_at.isoformat(),
            "outcome_at": None if self.outcome_at is None else self.outcome_at.isoformat(),
        }


_COLUMNS = (
    "idempotency_key, run_id, step, plan_version, tool, args_sha256, effect, principal, amount, "
    "card_digest, approver, resource, state, attempts, output, detail, intent_at, outcome_at"
)

_INSERT = """
INSERT INTO plangate.effects (idempotency_key, run_id, step, plan_version, tool, args_sha256,
    effect, principal, amount, card_digest, approver, resource, state)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'intent')
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING 1
"""
_LOCKED = f"SELECT {_COLUMNS} FROM plangate.effects WHERE idempotency_key = %s FOR UPDATE"
_AGAIN = f"""
UPDATE plangate.effects SET state = 'intent', attempts = attempts + 1, intent_at = now(),
    outcome_at = NULL, detail = '', card_digest = coalesce(card_digest, %s),
    approver = coalesce(approver, %s)
WHERE idempotency_key = %s RETURNING {_COLUMNS}
"""
_CONSUMED = "SELECT idempotency_key FROM plangate.effects WHERE card_digest = %s"
_OUTCOME = """
UPDATE plangate.effects SET state = %s, output = coalesce(%s, output), detail = %s,
    outcome_at = coalesce(outcome_at, now())
WHERE idempotency_key = %s
"""
# in the effect's own transaction, as the worker's role (the principal is not granted the
# ledger): done when it commits, nothing when it rolls back. One round trip: the key is a
# literal psycopg quotes (the simple protocol takes two statements, not parameters).
_DONE_IN_EFFECT = sql.SQL(
    "SET LOCAL ROLE NONE; UPDATE plangate.effects SET state = 'done', outcome_at = now() "
    "WHERE idempotency_key = {} AND state = 'intent'"
)


def _entry(row: dict[str, Any]) -> Entry:
    return Entry(
        key=row["idempotency_key"], run_id=row["run_id"], step=row["step"],
        plan_version=row["plan_version"], tool=row["tool"], args_sha256=row["args_sha256"],
        effect=row["effect"], principal=row["principal"], amount=row["amount"],
        card_digest=row["card_digest"], approver=row["approver"], resource=row["resource"],
        state=State(row["state"]),
        attempts=row["attempts"], output=row["output"], detail=row["detail"],
        intent_at=row["intent_at"], outcome_at=row["outcome_at"],
    )


def unavailable(e: Exception, what: str) -> ToolError:
    """The ledger cannot be written: the tool does not act. ``system_unavailable``: nothing was
    sent, so the step waits for Postgres as it waits for any system (an outage)."""
    return ToolError("system_unavailable", f"the effect ledger: {what}: {e}"[:DETAIL_MAX])


_LEDGER_DOWN = (PoolTimeout, psycopg.OperationalError,
                psycopg.errors.IdleInTransactionSessionTimeout)


@dataclass(frozen=True)
class LedgerTotals:
    """A principal's effects before a call, over the last hour and day: all its calls, its
    calls of the call's tool (``tool_*``) and of what the call names (``resource_*``); amounts
    where the tool declares one."""

    amount_hour: Decimal = Decimal(0)
    amount_day: Decimal = Decimal(0)
    calls_hour: int = 0
    calls_day: int = 0
    tool_amount_hour: Decimal = Decimal(0)
    tool_amount_day: Decimal = Decimal(0)
    tool_calls_hour: int = 0
    tool_calls_day: int = 0
    resource_amount_hour: Decimal = Decimal(0)
    resource_amount_day: Decimal = Decimal(0)
    resource_calls_hour: int = 0
    resource_calls_day: int = 0

    def in_cents(self) -> Totals:
        """These totals as the policies read them (``records.policy.Totals``: cents)."""
        return Totals(
            amount_cents_hour=cents(self.amount_hour), amount_cents_day=cents(self.amount_day),
            calls_hour=self.calls_hour, calls_day=self.calls_day,
            tool_amount_cents_hour=cents(self.tool_amount_hour),
            tool_amount_cents_day=cents(self.tool_amount_day),
            tool_calls_hour=self.tool_calls_hour, tool_calls_day=self.tool_calls_day,
            resource_amount_cents_hour=cents(self.resource_amount_hour),
            resource_amount_cents_day=cents(self.resource_amount_day),
            resource_calls_hour=self.resource_calls_hour,
            resource_calls_day=self.resource_calls_day,
        )


# A new call is admitted or refused here (raising a ``ToolError``), seeing ``LedgerTotals``.
Gate = Callable[[LedgerTotals], Awaitable[None]]

_HOUR = "intent_at > now() - interval '1 hour'"
_TOTALS = f"""
SELECT coalesce(sum(amount) FILTER (WHERE {_HOUR}), 0) AS amount_hour,
    coalesce(sum(amount), 0) AS amount_day,
    count(*) FILTER (WHERE {_HOUR}) AS calls_hour, count(*) AS calls_day,
    coalesce(sum(amount) FILTER (WHERE tool = %(tool)s AND {_HOUR}), 0) AS tool_amount_hour,
    coalesce(sum(amount) FILTER (WHERE tool = %(tool)s), 0) AS tool_amount_day,
    count(*) FILTER (WHERE tool = %(tool)s AND {_HOUR}) AS tool_calls_hour,
    count(*) FILTER (WHERE tool = %(tool)s) AS tool_calls_day,
    coalesce(sum(amount) FILTER (WHERE resource = %(resource)s AND {_HOUR}), 0)
        AS resource_amount_hour,
    coalesce(sum(amount) FILTER (WHERE resource = %(resource)s), 0) AS resource_amount_day,
    count(*) FILTER (WHERE resource = %(resource)s AND {_HOUR}) AS resource_calls_hour,
    count(*) FILTER (WHERE resource = %(resource)s) AS resource_calls_day
FROM plangate.effects
WHERE principal IS NOT DISTINCT FROM %(principal)s AND state <> 'failed'
    AND effect <> 'local_write' AND intent_at > now() - interval '1 day'
"""
# one lock per principal (a transaction's): its calls are admitted one at a time
_ADMIT_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_KNOWN = "SELECT 1 FROM plangate.effects WHERE idempotency_key = %s"


async def totals(world: World, principal: str | None, tool: str, resource: str | None = None
                 ) -> LedgerTotals:
    """The principal's ``LedgerTotals`` now (read, not admitted: ``begin`` with a gate admits)."""
    try:
        async with pg.reading(world) as conn:
            return await _totals(conn.cursor(row_factory=dict_row), principal, tool, resource)
    except _LEDGER_DOWN as e:
        raise unavailable(e, "the running totals could not be read") from e


async def _totals(cur: psycopg.AsyncCursor[dict[str, Any]], principal: str | None, tool: str,
                  resource: str | None) -> LedgerTotals:
    await cur.execute(_TOTALS, {"principal": principal, "tool": tool, "resource": resource})
    row = await cur.fetchone()
    if row is None:
        return LedgerTotals()
    return LedgerTotals(
        amount_hour=Decimal(row["amount_hour"]), amount_day=Decimal(row["amount_day"]),
        calls_hour=int(row["calls_hour"]), calls_day=int(row["calls_day"]),
        tool_amount_hour=Decimal(row["tool_amount_hour"]),
        tool_amount_day=Decimal(row["tool_amount_day"]),
        tool_calls_hour=int(row["tool_calls_hour"]), tool_calls_day=int(row["tool_calls_day"]),
        resource_amount_hour=Decimal(row["resource_amount_hour"]),
        resource_amount_day=Decimal(row["resource_amount_day"]),
        resource_calls_hour=int(row["resource_calls_hour"]),
        resource_calls_day=int(row["resource_calls_day"]),
    )


@dataclass(frozen=True)
class Begun:
    """What ``begin`` found: ``fresh`` an intent it wrote now (or again, after a failure that
    left nothing behind); else the row as it stood (``entry``), for the caller to resolve."""

    entry: Entry | None
    fresh: bool


async def begin(world: World, intent: Intent, gate: Gate | None = None) -> Begun:
    """The call's intent, committed before it acts; or the row its key already has (locked
    while this transaction decides). A card already consumed by another key, or the key used
    with other arguments, is refused here: nothing acts. ``gate``: a call whose key is new is
    first admitted by it against the principal's totals, under the principal's lock; refused,
    nothing is recorded (a key already recorded was admitted when it was)."""
    if gate is not None:
        return await _admitted(world, intent, gate)
    try:
        async with pg.reading(world) as conn:
            cur = conn.cursor(row_factory=dict_row)
            try:
                await cur.execute(_INSERT, _row(intent))
            except psycopg.errors.UniqueViolation:  # the card's index: another key has it
                raise consumed(intent.step, intent.tool, "another call") from None
            if await cur.fetchone() is not None:
                return Begun(None, fresh=True)
            async with conn.transaction():
                return await _resolve(cur, intent)
    except _LEDGER_DOWN as e:
        raise unavailable(e, "the intent was not recorded") from e


async def _admitted(world: World, intent: Intent, gate: Gate) -> Begun:
    try:
        async with pg.reading(world) as conn:
            cur = conn.cursor(row_factory=dict_row)
            async with conn.transaction():
                await cur.execute(_ADMIT_LOCK, (f"plangate.effects/{intent.principal or ''}",))
                await cur.execute(_KNOWN, (intent.key,))
                if await cur.fetchone() is not None:
                    return await _resolve(cur, intent)
                await gate(await _totals(cur, intent.principal, intent.tool, intent.resource))
                try:
                    await cur.execute(_INSERT, _row(intent))
                except psycopg.errors.UniqueViolation:  # the card's index: another key has it
                    raise consumed(intent.step, intent.tool, "another call") from None
                return Begun(None, fresh=True)
    except _LEDGER_DOWN as e:
        raise unavailable(e, "the intent was not recorded") from e


def _row(intent: Intent) -> tuple[object, ...]:
    return (intent.key, intent.run_id, intent.step, intent.plan_version, intent.tool,
            intent.args_sha256, intent.effect, intent.principal, intent.amount,
            intent.card_digest, intent.approver, intent.resource)


async def _resolve(cur: psycopg.AsyncCursor[dict[str, Any]], intent: Intent) -> Begun:
    """The key is in the ledger already: its row, locked, as it stands (a failure that left
    nothing behind is tried again under it)."""
    await cur.execute(_LOCKED, (intent.key,))
    row = await cur.fetchone()
    if row is None:  # taken out between the two statements: the operator's delete
        raise ToolError("system_unavailable", "the effect ledger lost the row of "
                        f"{intent.key} while it was read; try again")
    prior = _entry(row)
    if prior.args_sha256 != intent.args_sha256 or prior.tool != intent.tool:
        raise ToolError(
            "idempotency_conflict",
            f"{intent.tool}: the idempotency key {intent.key} is recorded for {prior.tool} "
            "with other arguments; not called",
        )
    if prior.state is State.FAILED:
        await cur.execute(_AGAIN, (intent.card_digest, intent.approver, intent.key))
        again = await cur.fetchone()
        if again is not None:
            return Begun(_entry(again), fresh=True)
    return Begun(prior, fresh=False)


def consumed(step: int, tool: str, other: str) -> ToolError:
    return ToolError(
        "approval_consumed",
        f"not called: the approval of step {step} ({tool}) was consumed by the effect "
        f"{other}; an approval pays once",
    )


async def consumed_by(world: World, card_digest: str) -> str | None:
    """The key of the effect that consumed the card of ``card_digest``, if one did."""
    try:
        async with pg.reading(world) as conn:
            cur = await conn.execute(_CONSUMED, (card_digest,))
            row = await cur.fetchone()
    except _LEDGER_DOWN as e:
        raise unavailable(e, "the approval's use could not be read") from e
    return None if row is None else str(row[0])


async def again(world: World, key: str) -> None:
    """An intent without an outcome whose call certainly did not act (read back: absent):
    the call goes ahead under it, one attempt more."""
    try:
        async with pg.reading(world) as conn:
            await conn.execute(
                "UPDATE plangate.effects SET attempts = attempts + 1, intent_at = now() "
                "WHERE idempotency_key = %s", (key,),
            )
    except _LEDGER_DOWN as e:
        raise unavailable(e, "the intent was not recorded") from e


async def settle(
    world: World, key: str, state: State, output: dict[str, JsonValue] | None = None,
    detail: str = "",
) -> None:
    """The call's outcome. Raises ``psycopg`` errors: a caller whose tool has acted must not
    fail for them (the row stays ``intent``: unknown, read back or halted, never acted again)."""
    data = None if output is None else Jsonb(output, dumps=_dumps)
    async with pg.reading(world) as conn:
        await conn.execute(_OUTCOME, (state.value, data, detail[:DETAIL_MAX], key))


LOCAL_WRITE = "local_write"  # a row of its own kind: a file written in the run's directory
_LOCAL = """
INSERT INTO plangate.effects (idempotency_key, run_id, step, plan_version, tool, args_sha256,
    effect, principal, resource, state, output, outcome_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 'done', %s, now())
ON CONFLICT (idempotency_key) DO UPDATE SET attempts = plangate.effects.attempts + 1,
    output = EXCLUDED.output, outcome_at = now()
    WHERE plangate.effects.effect = %s
"""


async def local_write(world: World, row: Intent, output: dict[str, JsonValue]) -> None:
    """A file a call wrote in its run's directory, recorded done (``effect`` ``local_write``):
    an audit row, never an answer (no call is answered from it) and no part of the running
    totals. A retry of the same call under the same key counts an attempt."""
    try:
        async with pg.reading(world) as conn:
            await conn.execute(_LOCAL, (
                row.key, row.run_id, row.step, row.plan_version, row.tool, row.args_sha256,
                LOCAL_WRITE, row.principal, row.resource, Jsonb(output, dumps=_dumps),
                LOCAL_WRITE,
            ))
    except _LEDGER_DOWN as e:
        raise unavailable(e, "the local write was not recorded") from e


async def found_by_key(world: World, key: str, record: JsonValue) -> None:
    """A call with no outcome whose record was read back by key (``effect_recorded`` held, in
    the workflow's read-back or after a cancel): it acted. Only a row still open is changed."""
    data = Jsonb(record if isinstance(record, dict) else {}, dumps=_dumps)
    async with pg.reading(world) as conn:
        await conn.execute(
            "UPDATE plangate.effects SET state = 'done', output = coalesce(output, %s), "
            "detail = 'read back by key', outcome_at = now() "
            "WHERE idempotency_key = %s AND state IN ('intent', 'unknown')", (data, key),
        )


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


async def entries(world: World, run_id: str | None = None, limit: int = 1000) -> list[Entry]:
    """Rows, newest first: of one run (its workflow id), or of every run."""
    async with pg.reading(world) as conn:
        cur = conn.cursor(row_factory=dict_row)
        where = "WHERE run_id = %s" if run_id is not None else ""
        params: Sequence[object] = (run_id, limit) if run_id is not None else (limit,)
        await cur.execute(
            f"SELECT {_COLUMNS} FROM plangate.effects {where} "
            "ORDER BY intent_at DESC, idempotency_key LIMIT %s", params,
        )
        return [_entry(r) for r in await cur.fetchall()]


# -- the outcome in the effect's own transaction ----------------------------------------------


def in_effect(key: str) -> contextvars.Token[pg.BeforeCommit | None]:
    """For the rest of this task (the tool's call), every tool transaction marks ``key`` done
    before it commits (``world.pg.tool_transaction``): the effect and its outcome are one
    commit. ``reset`` with the token afterwards."""

    async def mark(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute(_DONE_IN_EFFECT.format(sql.Literal(key)))

    return pg.BEFORE_COMMIT.set(mark)


def reset(token: contextvars.Token[pg.BeforeCommit | None]) -> None:
    pg.BEFORE_COMMIT.reset(token)
