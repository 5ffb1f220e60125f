#!/usr/bin/env bash
# The databases and roles of docker-compose.yml. The postgres image runs this once, as its
# superuser, when the service starts on an empty data volume (/docker-entrypoint-initdb.d);
# on a volume that exists it runs no more, so a change here is applied to one by hand.
#
#   role            logs in  owns                                   used by
#   temporal        yes      databases temporal, temporal_visibility temporal-schema, temporal
#   plangate_owner  yes      database plangate; schemas it creates   plangate-setup (once)
#                            (plangate, and staging)
#   plangate_worker yes      the tables it loads into staging        the workers: tools, probes
#
# None is a superuser, none may create roles or databases, and none may connect to another's
# database. plangate_worker may, in database plangate: use the schemas plangate_owner creates and
# read, insert and update (never delete, alter or drop) the tables in them (plangate.jobs and
# plangate.loads: its bookkeeping; a deployment's extension tables); create tables in `staging`
# and load them (the tables it creates are its own). Principals a run acts for (on_behalf_of)
# are roles the operator adds and grants to plangate_worker (docs/authority.md).
#
# Passwords come from the environment (the .env file, through docker-compose.yml) as psql
# variables, quoted by psql: never part of the SQL text.
set -euo pipefail

: "${TEMPORAL_DB_PASSWORD:?}" "${PLANGATE_OWNER_DB_PASSWORD:?}" "${PLANGATE_WORKER_DB_PASSWORD:?}"

psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER:-postgres}" --dbname postgres \
    -v temporal_password="$TEMPORAL_DB_PASSWORD" \
    -v owner_password="$PLANGATE_OWNER_DB_PASSWORD" \
    -v worker_password="$PLANGATE_WORKER_DB_PASSWORD" <<'SQL'
CREATE ROLE temporal LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'temporal_password';
CREATE ROLE plangate_owner LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'owner_password';
CREATE ROLE plangate_worker LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'worker_password';

-- Temporal's: its admin tool sets the schema up in them (temporal-schema), as their owner.
CREATE DATABASE temporal OWNER temporal;
CREATE DATABASE temporal_visibility OWNER temporal;
-- (the visibility schema installs the extension btree_gin itself: a trusted one, which the
-- database's owner may create)
REVOKE ALL ON DATABASE temporal, temporal_visibility FROM PUBLIC;

-- plangate's: the tables tools and probes read and write. plangate_owner creates plangate's
-- own (`plangate setup`); the worker gets what it needs on what the owner creates.
CREATE DATABASE plangate OWNER plangate_owner;
REVOKE ALL ON DATABASE plangate FROM PUBLIC;
GRANT CONNECT ON DATABASE plangate TO plangate_worker;
REVOKE CONNECT ON DATABASE postgres, template1 FROM PUBLIC;  -- the superuser's alone
\connect plangate
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE plangate_owner GRANT USAGE ON SCHEMAS TO plangate_worker;
ALTER DEFAULT PRIVILEGES FOR ROLE plangate_owner
    GRANT SELECT, INSERT, UPDATE ON TABLES TO plangate_worker;
ALTER DEFAULT PRIVILEGES FOR ROLE plangate_owner
    GRANT USAGE, SELECT ON SEQUENCES TO plangate_worker;
-- where plans load (warehouse.load; PLANGATE_ALLOWED_SCHEMAS names it for the workers)
CREATE SCHEMA staging AUTHORIZATION plangate_owner;
GRANT USAGE, CREATE ON SCHEMA staging TO plangate_worker;
SQL
