#!/bin/sh
# Starts the worker (bin/worker.ts) with its JavaScript heap bounded: V8 sizes each isolate's old
# generation from the machine's memory (about 4 GB on 24 GiB) and grows it lazily, so a worker
# draining a long backlog kept ~300 MB more garbage than a short drain did (bench:scale) although
# its live heap stayed flat. A V8 heap limit exists only as a launch flag, hence this script;
# `npm run worker` and the image's `switchyard worker` both run it. The bound applies to the main
# thread (activities) and to the workflow thread alike. bin/worker.ts validates the value and logs
# the limit it runs with.
set -eu
heap="${SWITCHYARD_WORKER_HEAP_MB:-384}"
case "$heap" in
  '' | *[!0-9]*)
    echo "SWITCHYARD_WORKER_HEAP_MB must be a whole number of MB (0: V8's own limit)" >&2
    exit 2
    ;;
esac
entry="$(dirname "$0")/worker.ts"
if [ "$heap" -eq 0 ]; then
  exec node --import tsx "$entry" "$@"
fi
exec node --max-old-space-size="$heap" --import tsx "$entry" "$@"
