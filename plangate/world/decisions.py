"""What the deployment's Cedar policies decided, kept where it can be counted:
``plangate.policy_decisions``, a row for every decision that was not a plain permit (a forbid,
or people asked for), enforced or, in shadow mode (``PLANGATE_POLICY_MODE=shadow``), what would
have been. Written by the worker (at a version's guards and at the call), never by a plan;
read by ``plangate report`` and ``plangate policy decisions``.

Recording is the record's, not the decision's: a row that cannot be written is logged and the
decision stands (a refusal refuses, a shadow decision lets the call go).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import PoolTimeout

from plangate.records.policy import Decision, Outcome
from plangate.world import pg
from plangate.world.clients import World

log = logging.getLogger(__name__)

_INSERT = """
INSERT INTO plangate.policy_decisions (run_id, plan_version, step, tool, principal, bundle,
    outcome, policies, approvers, enforced, at_call, reason, decided_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
"""
_COLUMNS = ("run_id, plan_version, step, tool, principal, bundle, outcome, policies, approvers, "
            "enforced, at_call, reason, decided_at")


@dataclass(frozen=True)
class Recorded:
    """One row: which call, and what was decided of it."""

    run_id: str
    plan_version: int
    step: int
    tool: str
    principal: str | None
    bundle: str
    outcome: Outcome
    policies: tuple[str, ...]
    approvers: int
    enforced: bool
    at_call: bool
    reason: str
    decided_at: datetime

    @property
    def would_refuse(self) -> bool:
        """A forbid shadow mode let through."""
        return self.outcome is Outcome.FORBID and not self.enforced


def worth_keeping(d: Decision) -> bool:
    return d.outcome is not Outcome.PERMIT


async def record(
    world: World, d: Decision, *, run_id: str, plan_version: int, step: int, tool: str,
    principal: str | None, at_call: bool,
) -> None:
    """Keep ``d`` (not a plain permit); a failure to is logged, never raised."""
    if not worth_keeping(d):
        return
    try:
        async with pg.reading(world) as conn:
            await conn.execute(_INSERT, (
                run_id, plan_version, step, tool, principal, d.bundle, d.outcome.value,
                list(d.policies), d.approvers, d.enforced, at_call, d.reason[:500],
                d.decided_at,
            ))
    except (PoolTimeout, psycopg.Error) as e:
        log.warning("a policy decision of %s step %s was not recorded: %s", run_id, step, e)


async def listed(world: World, since: datetime, limit: int = 1000) -> list[Recorded]:
    """Rows since ``since``, newest first."""
    async with pg.reading(world) as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(
            f"SELECT {_COLUMNS} FROM plangate.policy_decisions WHERE decided_at >= %s "
            "ORDER BY decided_at DESC, id DESC LIMIT %s", (since, limit))
        return [Recorded(
            run_id=r["run_id"], plan_version=r["plan_version"], step=r["step"], tool=r["tool"],
            principal=r["principal"], bundle=r["bundle"], outcome=Outcome(r["outcome"]),
            policies=tuple(r["policies"]), approvers=r["approvers"], enforced=r["enforced"],
            at_call=r["at_call"], reason=r["reason"], decided_at=r["decided_at"],
        ) for r in await cur.fetchall()]
