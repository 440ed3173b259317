#!/bin/sh
# Creates (first run) or upgrades Temporal's two databases on the compose stack's PostgreSQL with
# temporal-sql-tool from the admin-tools image. Idempotent: `create` of an existing database
# fails and is ignored, `setup-schema -v 0.0` is a no-op on an initialised one, and
# `update-schema` applies only what is missing.
set -eu
tool() { temporal-sql-tool --plugin postgres12 --ep postgres -p 5432 -u temporal --pw "$TEMPORAL_DB_PASSWORD" "$@"; }
for db in temporal temporal_visibility; do
  case "$db" in
    temporal) dir=/etc/temporal/schema/postgresql/v12/temporal/versioned ;;
    *) dir=/etc/temporal/schema/postgresql/v12/visibility/versioned ;;
  esac
  tool --db "$db" create || echo "database $db exists"
  tool --db "$db" setup-schema -v 0.0
  tool --db "$db" update-schema -d "$dir"
done
echo 'Temporal schema ready'
