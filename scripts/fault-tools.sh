#!/usr/bin/env bash
# Install the fault suite's tools (`make faults`, faults/*.py) into
# $SYMBOLS_STATE_DIR/tools (default <repo>/.services/tools), pinned, idempotent:
#
#   bin/toxiproxy-server  Toxiproxy 2.5.0 (go install ...toxiproxy/v2/cmd/server, which
#                         builds a binary named `server`; renamed here)
#   bin/hey               hey 0.1.5, the HTTP load generator
#   mitmproxy/bin/mitmdump  mitmproxy 11.0.2 in a venv of its own, so that its pins
#                         never fight requirements.txt (the newest release for Python 3.11)
#
# gunicorn and Hypothesis are pinned in requirements.txt (the project's venv).
#
# usage: scripts/fault-tools.sh        prints the tools directory on stdout
# Go modules come from the Go module proxy, mitmproxy from PyPI; a rerun with
# everything in place does nothing (each tool's version is checked, not just its presence).
set -euo pipefail
umask 022

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
STATE_DIR=$(realpath -m -- "${SYMBOLS_STATE_DIR:-$REPO/.services}")
TOOLS=$STATE_DIR/tools
PYTHON=${PYTHON:-python3}

TOXIPROXY_VERSION=v2.5.0
HEY_VERSION=v0.1.5
MITMPROXY_VERSION=11.0.2

log() { printf 'fault-tools: %s\n' "$*" >&2; }

# go_install MODULE@VERSION NAME: build into $TOOLS/go-bin, keep as bin/NAME-VERSION and
# link bin/NAME to it (the version in the file name is how a rerun knows it is done).
go_install() {
  local module=$1 version=$2 built=$3 name=$4
  [[ -x $TOOLS/bin/$name-$version ]] && { ln -sfn "$name-$version" "$TOOLS/bin/$name"; return 0; }
  if ! command -v go >/dev/null; then
    log "go is needed to build $name (apt-get install golang-go)"
    exit 1
  fi
  log "building $name $version (go install $module@$version)"
  install -d "$TOOLS/bin" "$TOOLS/go-bin"
  GOPATH=$TOOLS/go GOBIN=$TOOLS/go-bin GOFLAGS=-modcacherw CGO_ENABLED=0 \
    go install "$module@$version" >&2
  mv -f "$TOOLS/go-bin/$built" "$TOOLS/bin/$name-$version"
  ln -sfn "$name-$version" "$TOOLS/bin/$name"
}

mitmproxy_install() {
  local venv=$TOOLS/mitmproxy
  if [[ -x $venv/bin/mitmdump ]] &&
    [[ $("$venv/bin/python" -c 'import mitmproxy.version as v; print(v.VERSION)' 2>/dev/null) = "$MITMPROXY_VERSION" ]]; then
    return 0
  fi
  log "installing mitmproxy $MITMPROXY_VERSION into $venv"
  rm -rf "$venv"
  "$PYTHON" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "mitmproxy==$MITMPROXY_VERSION" >&2
}

main() {
  install -d "$TOOLS"
  exec 9>>"$TOOLS/.lock"
  flock -w 900 9 || { log "timed out waiting for $TOOLS/.lock"; exit 1; }
  go_install github.com/Shopify/toxiproxy/v2/cmd/server "$TOXIPROXY_VERSION" server toxiproxy-server
  go_install github.com/rakyll/hey "$HEY_VERSION" hey hey
  mitmproxy_install
  echo "$TOOLS"
}

main "$@"
