"""Tables plangate itself keeps in Postgres, in schema ``plangate`` (never a load target), then
those of the deployment's extensions (``activities.extensions``: schema ``demo`` only where the
demo systems are on).

- ``plangate.jobs``: job states ``job_state`` reads and ``set_job_state`` writes, each the job
  of one run (``owner``: the run that set it) or of the outside world (``owner`` NULL), so no run
  satisfies another's wait;
- ``plangate.loads``: what each ``warehouse.load`` put in its target (the source's SHA-256 and
  its data-row count), written in the load's own transaction, read by ``table_loaded_from``;
- ``plangate.effects``: the effect ledger (``world.ledger``), a row per call of a ``write``,
  ``external`` or ``money`` tool, written by the tool's activity.
- ``plangate.policy_decisions``: every decision of the deployment's Cedar policies that was not
  a plain permit (``world.decisions``): refusals, and in shadow mode what would have been.
- ``plangate.windows`` and ``plangate.windows_since``: each finished run's tool calls' windows,
  and since when the deployment's workers write them (``world.windows``), read by
  ``plangate report``.
- ``plangate.submissions``: which run chain each signed submission started
  (``world.submissions``): a submission starts one run.
- ``plangate.runs_index``: each run's status and the cards it waits on, written by the worker
  as they change (``world.run_index``), read by the card list and ``plangate runs``: where to
  look, never what decides.
- ``plangate.deliveries``: each card's notice on each channel the approval page sends it to
  (``world.deliveries``): claimed by one page process, retried, its outcome recorded.
- ``plangate.grants`` and ``plangate.grant_uses``: standing grants as their approvers signed
  them, and each call one covers (``world.grants``), written by ``plangate grant`` and the
  worker;
- ``plangate.keys``: the deployment's own secrets (``world.keys``: the call seal's key), made
  once by the first worker and read by every worker after.
- ``plangate.receipts``: the signed receipt of each ledgered effect (``world.receipts``),
  written by the tool's activity as the call concludes.

A worker creates them when it starts (``ensure_schema``), unless its role may not: then
``plangate setup`` creates them once, as their owner, and the worker, started with
``--no-setup``, only checks that they are there for it (``require_schema``).
"""

from __future__ import annotations

import re

import psycopg
from psycopg import sql

from plangate.activities.extensions import registry_for
from plangate.errors import PlangateError
from plangate.world import keys
from plangate.world.clients import World
from plangate.world.pg import ident
from plangate.world.settings import CatalogueSettings

OWN_SCHEMA = "plangate"

SCHEMA = """
CREATE SCHEMA IF NOT EXISTS plangate;

CREATE TABLE IF NOT EXISTS plangate.jobs (
    job_id text NOT NULL,
    state text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    owner text
);

CREATE TABLE IF NOT EXISTS plangate.loads (
    target text PRIMARY KEY,
    source_sha256 text NOT NULL,
    rows bigint NOT NULL,
    idempotency_key text NOT NULL,
    loaded_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS plangate.effects (
    idempotency_key text PRIMARY KEY,
    run_id text NOT NULL,
    step integer NOT NULL,
    plan_version integer NOT NULL,
    tool text NOT NULL,
    args_sha256 text NOT NULL,
    effect text NOT NULL,
    principal text,
    amount numeric,
    card_digest text,
    approver text,
    state text NOT NULL CHECK (state IN ('intent', 'done', 'failed', 'unknown')),
    attempts integer NOT NULL DEFAULT 1,
    output jsonb,
    detail text NOT NULL DEFAULT '',
    intent_at timestamptz NOT NULL DEFAULT now(),
    outcome_at timestamptz
);
CREATE UNIQUE INDEX IF NOT EXISTS effects_card ON plangate.effects (card_digest)
    WHERE card_digest IS NOT NULL;
CREATE INDEX IF NOT EXISTS effects_run ON plangate.effects (run_id);
-- what the call names (a policy's running totals per resource): added after the table
ALTER TABLE plangate.effects ADD COLUMN IF NOT EXISTS resource text;
CREATE INDEX IF NOT EXISTS effects_principal ON plangate.effects (principal, intent_at);
CREATE TABLE IF NOT EXISTS plangate.policy_decisions (
    id bigserial PRIMARY KEY,
    run_id text NOT NULL,
    plan_version integer NOT NULL,
    step integer NOT NULL,
    tool text NOT NULL,
    principal text,
    bundle text NOT NULL,
    outcome text NOT NULL,
    policies text[] NOT NULL,
    approvers integer NOT NULL DEFAULT 0,
    enforced boolean NOT NULL,
    at_call boolean NOT NULL,
    reason text NOT NULL DEFAULT '',
    decided_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS policy_decisions_at ON plangate.policy_decisions (decided_at);
CREATE TABLE IF NOT EXISTS plangate.windows (
    execution text PRIMARY KEY,
    workflow_id text NOT NULL,
    deployment text NOT NULL,
    status text NOT NULL,
    closed_at timestamptz NOT NULL DEFAULT now(),
    calls jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS windows_closed ON plangate.windows (deployment, closed_at);
CREATE TABLE IF NOT EXISTS plangate.windows_since (
    deployment text PRIMARY KEY,
    since timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS plangate.submissions (
    signature_sha256 text PRIMARY KEY,
    submitter text NOT NULL,
    workflow_id text NOT NULL,
    execution text NOT NULL,
    taken_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS plangate.runs_index (
    workflow_id text PRIMARY KEY,
    execution text NOT NULL,
    deployment text NOT NULL,
    status text NOT NULL,
    goal text NOT NULL,
    cards jsonb NOT NULL,
    started_at timestamptz NOT NULL,
    seq bigint NOT NULL,
    closed_at timestamptz,
    written_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS runs_index_status ON plangate.runs_index (deployment, status);
CREATE INDEX IF NOT EXISTS runs_index_started ON plangate.runs_index (deployment, started_at);
CREATE TABLE IF NOT EXISTS plangate.deliveries (
    digest text NOT NULL,
    channel text NOT NULL,
    deployment text NOT NULL,
    run_id text NOT NULL,
    step integer NOT NULL,
    expires_at timestamptz NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    claimed_until timestamptz NOT NULL,
    next_at timestamptz NOT NULL DEFAULT now(),
    last_at timestamptz,
    last_error text,
    delivered_at timestamptz,
    PRIMARY KEY (digest, channel)
);
CREATE INDEX IF NOT EXISTS deliveries_owed ON plangate.deliveries (deployment, expires_at);
CREATE TABLE IF NOT EXISTS plangate.keys (
    name text PRIMARY KEY,
    key bytea NOT NULL,
    made_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS plangate.receipts (
    idempotency_key text PRIMARY KEY,
    run_id text NOT NULL,
    state text NOT NULL,
    receipt text NOT NULL,
    made_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS receipts_run ON plangate.receipts (run_id);
CREATE TABLE IF NOT EXISTS plangate.grants (
    grant_id text PRIMARY KEY,
    tool text NOT NULL,
    principal text NOT NULL,
    approver text NOT NULL,
    uses integer NOT NULL CHECK (uses > 0),
    expires_at timestamptz NOT NULL,
    terms jsonb NOT NULL,
    signature text NOT NULL,
    issued_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz,
    revoked_by text
);
CREATE INDEX IF NOT EXISTS grants_tool ON plangate.grants (tool, principal);
CREATE TABLE IF NOT EXISTS plangate.grant_uses (
    idempotency_key text PRIMARY KEY,
    grant_id text NOT NULL REFERENCES plangate.grants (grant_id),
    workflow_id text NOT NULL,
    args_sha256 text NOT NULL,
    state text NOT NULL CHECK (state IN ('reserved', 'used')),
    reserved_at timestamptz NOT NULL DEFAULT now(),
    used_at timestamptz
);
CREATE INDEX IF NOT EXISTS grant_uses_grant ON plangate.grant_uses (grant_id);
"""

# Databases from before jobs had owners: the column, the keys that scope job ids by owner (one
# outside job per id, one per id and run), then the old key on the id alone. Each only where
# missing (an ALTER needs the table's owner even when it would change nothing); the new keys
# hold before the old goes (every existing job is the outside world's, ids unique already).
MIGRATE = """
DO $$
DECLARE pk name;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'plangate.jobs'::regclass
                   AND attname = 'owner' AND NOT attisdropped) THEN
        ALTER TABLE plangate.jobs ADD COLUMN IF NOT EXISTS owner text;
    END IF;
    IF to_regclass('plangate.jobs_outside_key') IS NULL THEN
        CREATE UNIQUE INDEX IF NOT EXISTS jobs_outside_key ON plangate.jobs (job_id)
            WHERE owner IS NULL;
    END IF;
    IF to_regclass('plangate.jobs_owned_key') IS NULL THEN
        CREATE UNIQUE INDEX IF NOT EXISTS jobs_owned_key ON plangate.jobs (owner, job_id);
    END IF;
    SELECT conname INTO pk FROM pg_constraint
        WHERE conrelid = 'plangate.jobs'::regclass AND contype = 'p';
    IF pk IS NOT NULL THEN
        ALTER TABLE plangate.jobs ALTER COLUMN job_id SET NOT NULL;
        EXECUTE 'ALTER TABLE plangate.jobs DROP CONSTRAINT ' || quote_ident(pk);
    END IF;
END $$;
"""

# plangate's own tables, as SCHEMA creates them
OWN_TABLES: tuple[str, ...] = tuple(re.findall(r"CREATE TABLE IF NOT EXISTS (\S+) \(", SCHEMA))
# those a later plangate added: missing beside the others, the tables are an older plangate's
LATER_TABLES = frozenset({"plangate.effects", "plangate.policy_decisions", "plangate.windows",
                          "plangate.windows_since", "plangate.submissions",
                          "plangate.runs_index", "plangate.deliveries",
                          "plangate.keys", "plangate.receipts", "plangate.grants",
                          "plangate.grant_uses"})

# Two workers bootstrapping at once must not race on CREATE SCHEMA / CREATE TABLE.
_LOCK = "SELECT pg_advisory_xact_lock(hashtext('plangate.schema'))"


async def ensure_schema(world: World, catalogue: CatalogueSettings) -> None:
    """plangate's own tables, then those of the extensions of ``catalogue``."""
    pool = await world.pool()
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK)
        await conn.execute(SCHEMA)
        await conn.execute(MIGRATE)
    await keys.seal_key(world)  # made by the setup, so a worker that may only read finds it
    for ensure in registry_for(catalogue).schemas.values():
        await ensure(world)


# columns later plangates added to tables an older one created
LATER_COLUMNS = (("plangate.jobs", "owner"), ("plangate.effects", "resource"))


class SchemaNotReady(PlangateError):
    """plangate's own tables are missing, or this role may not read them."""


async def require_schema(world: World) -> None:
    """plangate's own tables are there, and the role of ``world`` may read them: what a worker
    that does not create them (``plangate worker --no-setup``) checks before it polls. The
    tables of the deployment's extensions are their own affair (``plangate setup`` creates them
    with plangate's)."""
    pool = await world.pool()
    async with pool.connection() as conn:
        try:
            cur = await conn.execute(
                "SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NULL",
                (list(OWN_TABLES),),
            )
            missing = [row[0] for row in await cur.fetchall()]
            if missing and len(missing) < len(OWN_TABLES) and set(missing) <= LATER_TABLES:
                raise SchemaNotReady(
                    f"plangate's tables are from an older plangate ({', '.join(missing)} "
                    "missing): run `plangate setup` as the role that owns them"
                )
            if missing:
                raise SchemaNotReady(
                    f"plangate's tables {', '.join(missing)} are missing: run `plangate setup` "
                    "as the role that is to own them"
                )
            for table in OWN_TABLES:
                await conn.execute(sql.SQL("SELECT 1 FROM {} LIMIT 0").format(ident(table)))
            for table, column in LATER_COLUMNS:  # each asked alone: the one missing is named
                try:
                    await conn.execute(sql.SQL("SELECT {} FROM {} LIMIT 0").format(
                        sql.Identifier(column), ident(table)))
                except psycopg.errors.UndefinedColumn:
                    raise SchemaNotReady(
                        f"plangate's tables are from an older plangate ({table} has no "
                        f"{column}): run `plangate setup` as the role that owns them"
                    ) from None
        except psycopg.errors.InsufficientPrivilege as e:
            first = str(e).strip().splitlines()[0]
            raise SchemaNotReady(f"this role may not use plangate's tables: {first}") from None
