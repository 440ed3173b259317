#!/bin/sh
# First start of the compose stack's PostgreSQL only (docker-entrypoint-initdb.d): the database
# Switchyard's migrations run in, and a login for Temporal that may create its two databases
# (deploy/temporal/setup-schema.sh). Switchyard's own roles (switchyard_owner, switchyard_api,
# switchyard_worker, …) are created by `npm run migrate` (the migrate service), not here.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v temporal_password="$TEMPORAL_DB_PASSWORD" <<'SQL'
CREATE DATABASE switchyard;
CREATE ROLE temporal LOGIN CREATEDB PASSWORD :'temporal_password';
SQL
