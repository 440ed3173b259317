#!/bin/sh
# Prints a deploy/.env with fresh random secrets for the compose stack:
#   sh deploy/gen-env.sh > deploy/.env && chmod 600 deploy/.env
# Passwords are hex (safe inside postgres:// URLs without escaping); the master key is 32 random
# bytes, base64 (SWITCHYARD_MASTER_KEY's format). Keep the file: a new master key cannot open the
# secrets sealed with the old one.
set -eu
hex() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }
cat <<ENV
POSTGRES_PASSWORD=$(hex 24)
TEMPORAL_DB_PASSWORD=$(hex 24)
SWITCHYARD_API_DB_PASSWORD=$(hex 24)
SWITCHYARD_WORKER_DB_PASSWORD=$(hex 24)
SWITCHYARD_MASTER_KEY=$(head -c 32 /dev/urandom | base64 | tr -d '\n')
SWITCHYARD_ADMIN_TOKEN=$(hex 32)
GRAFANA_ADMIN_PASSWORD=$(hex 16)
ENV
