#!/bin/sh
# Creates the namespace Switchyard runs in and its three custom search attributes (Keyword;
# workflows/shared.ts SEARCH_ATTRIBUTE_KEYS). `npm run migrate` registers the attributes too, and
# the API and the worker refuse to start without them. Idempotent: only what is missing is created.
set -eu
ns="${TEMPORAL_NAMESPACE:-default}"
addr="$TEMPORAL_ADDRESS"
i=0
until temporal operator cluster health --address "$addr" >/dev/null 2>&1; do
  i=$((i + 1))
  [ "$i" -lt 60 ] || { echo "Temporal at $addr is not healthy after 120 s" >&2; exit 1; }
  sleep 2
done
temporal operator namespace describe --address "$addr" --namespace "$ns" >/dev/null 2>&1 ||
  temporal operator namespace create --address "$addr" --namespace "$ns" --retention 72h
# A namespace just created takes a few seconds to reach every service's cache.
i=0
until existing="$(temporal operator search-attribute list --address "$addr" --namespace "$ns" 2>&1)"; do
  i=$((i + 1))
  [ "$i" -lt 30 ] || { echo "$existing" >&2; exit 1; }
  sleep 2
done
for name in SwitchyardTenantId SwitchyardChannel SwitchyardMessageStatus; do
  if printf '%s\n' "$existing" | grep -qw "$name"; then
    echo "search attribute $name present"
  else
    temporal operator search-attribute create --address "$addr" --namespace "$ns" --name "$name" --type Keyword
  fi
done
echo "namespace $ns ready"
