#!/bin/sh
# Service temporal-schema (temporalio/admin-tools), once before the server starts: Temporal's
# tables in its two databases, set up and brought to this release's schema by Temporal's own
# tool, temporal-sql-tool, of the same version as the server (the way Temporal's compose
# examples set a server up now that the auto-setup image is deprecated).
#
# The databases exist already, owned by the role temporal (deploy/postgres/init-roles.sh): no
# create-database, no superuser. Both steps are safe to repeat: setup-schema -v 0.0 starts only
# a schema that has no version yet, update-schema applies only the versions past the current
# one. So this runs at every `docker compose up`, and brings the schema forward when the
# images are upgraded.
set -eu
: "${SQL_PASSWORD:?the password of the role temporal}"
tool() { temporal-sql-tool --plugin postgres12 --ep postgres -p 5432 -u temporal "$@"; }
versioned=/etc/temporal/schema/postgresql/v12

tool --db temporal setup-schema -v 0.0
tool --db temporal update-schema -d "$versioned/temporal/versioned"
tool --db temporal_visibility setup-schema -v 0.0
tool --db temporal_visibility update-schema -d "$versioned/visibility/versioned"
echo "temporal-schema: databases temporal and temporal_visibility are at this release's schema"
