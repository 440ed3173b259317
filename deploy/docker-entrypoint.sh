#!/bin/sh
# The image's entry point: `api`, `worker` or `migrate` runs that entry point (bin/<name>.ts)
# through tsx with node as PID 1 (it handles SIGTERM: drain, then stop); anything else is run
# as given (`docker run … switchyard node -v`).
set -eu
cd /app
role="${1:-api}"
case "$role" in
  api | worker | migrate)
    shift || true
    exec node --import tsx "bin/$role.ts" "$@"
    ;;
  *)
    exec "$@"
    ;;
esac
