#!/bin/sh
# Starts the worker (bin/worker.ts) with its JavaScript heap bounded: V8 sizes each isolate's old
# generation from the machine's memory (about 4 GB on 24 GiB) and grows it lazily, so a worker
# draining a long backlog kept ~300 MB more garbage than a short drain did (bench:scale) although
# its live heap stayed flat. A V8 heap limit exists only as a launch flag, hence this script;
# `npm run worker` and the image's `switchyard worker` both run it. The bound applies to the main
# thread (activities) and to the workflow thread alike, and wins over a --max-old-space-size in
# NODE_OPTIONS. bin/worker.ts validates the value the same way (config/env.ts) and logs the limit
# it runs with.
set -eu
heap="${SWITCHYARD_WORKER_HEAP_MB:-384}"
refuse() {
  echo "SWITCHYARD_WORKER_HEAP_MB must be a whole number of MB, 0 (V8's own limit) or 128 to 1048576" >&2
  exit 2
}
case "$heap" in
  '' | *[!0-9]*) refuse ;;
esac
# At most 7 digits before any arithmetic (sh's integers are bounded); leading zeros are decimal.
[ "${#heap}" -le 7 ] || refuse
if [ "$heap" -ne 0 ] && { [ "$heap" -lt 128 ] || [ "$heap" -gt 1048576 ]; }; then refuse; fi
# From the checkout's root, whatever the caller's directory: tsx is resolved from there.
cd "$(dirname "$0")/.."
if [ "$heap" -eq 0 ]; then
  exec node --import tsx bin/worker.ts "$@"
fi
exec node --max-old-space-size="$heap" --import tsx bin/worker.ts "$@"
