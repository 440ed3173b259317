#!/bin/sh
# The image's entry point: `api`, `worker` or `migrate` runs that entry point (bin/<name>.ts)
# through tsx with node as PID 1 (it handles SIGTERM: drain, then stop); anything else is run
# as given (`docker run … switchyard node -v`).
set -eu
cd /app
role="${1:-api}"
case "$role" in
  api | migrate)
    shift || true
    exec node --import tsx "bin/$role.ts" "$@"
    ;;
  worker)
    # bin/worker.sh: the same, with the heap bound SWITCHYARD_WORKER_HEAP_MB (it execs node).
    shift || true
    exec sh bin/worker.sh "$@"
    ;;
  *)
    exec "$@"
    ;;
esac
