#!/usr/bin/env bash
# Provision and manage the local services the project needs, bound to
# 127.0.0.1 only:
#
#   pg   PostgreSQL 15, a private cluster (not Debian's "main" cluster)
#   pgb  PgBouncer (Debian's package, 1.18 on Debian 12) in front of pg, in
#        transaction pooling mode, as production deploys it
#   pgs  a streaming hot standby of pg (pg_basebackup; made anew at each start),
#        not started unless named: `start pgs`, `promote pgs`, `stop pgs`
#   esc  an Elasticsearch cluster of 3 nodes (small heaps) beside es, not started
#        unless named: `start esc`, `kill esc N` (node N, SIGKILL), `stop esc`
#   es   Elasticsearch 8.19.21 (the integ-test-zip distribution from Maven Central)
#   s3   s3proxy 4.1.0 with its filesystem backend (Maven Central)
#
# usage: scripts/services.sh start|stop|restart|status|env [--fast] [pg|pgb|pgs|es|esc|s3 ...]
#        scripts/services.sh promote pgs
#        scripts/services.sh kill esc N
#        scripts/services.sh clean
#        scripts/services.sh browser
#        scripts/services.sh stress
#        (no names = all four; pgb starts pg too)
#
#   start    install/download what is missing, start what is not running, wait
#            until each service answers, write $STATE_DIR/env.  Idempotent.
#   stop     stop what this script started (strictly by PID file).
#   status   one line per service; exits non-zero if any requested service is down.
#   env      print the `export` lines (also written by start to $STATE_DIR/env).
#   clean    stop all three, then remove this checkout's $SERVICE_DIR and
#            $STATE_DIR (data, logs, caches, env).
#   browser  install Debian's chromium and chromium-driver when missing (the
#            dashboard's browser tests; `make test` runs it).  Idempotent.
#   stress   install Debian's stress-ng when missing (the load of `make stress`,
#            scripts/stress.py).  Idempotent.
#   --fast   (or SYMBOLS_PG_FAST=1) PostgreSQL with fsync=off,
#            synchronous_commit=off, full_page_writes=off: FOR TESTS ONLY.
#
# Environment overrides: SYMBOLS_STATE_DIR (default: <repo>/.services),
# SYMBOLS_PG_PORT (54329), SYMBOLS_ES_PORT (9201), SYMBOLS_ES_TRANSPORT_PORT
# (9301-9399, a range: ES takes the first free one), SYMBOLS_ES_HEAP ("1g" or
# full JVM options; default "-Xms512m -Xmx1g"), SYMBOLS_S3_PORT (9444),
# SYMBOLS_M2_REPO (~/.m2/repository), SYMBOLS_JAVA_HOME (a JDK 17 home),
# SYMBOLS_PGB_PORT (54339), SYMBOLS_PGS_PORT (54349), SYMBOLS_ESC_PORT (9211: node
# i on 9211 + i - 1), SYMBOLS_ESC_TRANSPORT_PORT (9311), SYMBOLS_ESC_NODES (3),
# SYMBOLS_ESC_HEAP (256m).
#
# Must run as root: initdb and Elasticsearch refuse to run as root, so they are
# run as the `postgres` and `symbols-es` OS users through runuser.
#
# Where things live: $STATE_DIR (<repo>/.services) holds what root uses: the
# env file, the lock, s3proxy's data and the caches.  PostgreSQL's and
# Elasticsearch's directories (and the Elasticsearch distribution) must be
# reachable by their OS users, which a clone under a mode-700 home is not; they
# live in $SERVICE_DIR, /var/lib/symbols-services/<repo name>-<hash of
# $STATE_DIR>, one per state dir (named in $STATE_DIR/env; its `checkout` file
# names the state dir it belongs to; see ensure_service_dir).
set -euo pipefail
umask 022

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# Absolute and canonical: the paths below end up in the daemons' command lines,
# which is how their pid files are validated.
STATE_DIR=$(realpath -m -- "${SYMBOLS_STATE_DIR:-$REPO/.services}")
SERVICES_ROOT=/var/lib/symbols-services
# A state dir set up before $SERVICE_DIR existed holds pg/ and es/ itself: its
# services (perhaps running) stay where they are until `clean`.
if [[ -d $STATE_DIR/pg || -d $STATE_DIR/es ]]; then
  SERVICE_DIR=$STATE_DIR
else
  # Named by a hash of the canonical state dir, so that two checkouts (a copy
  # of a clone included) never share one; the name part is for people: the
  # checkout holding the state dir (a git worktree whose .services is a link to
  # the main checkout's reaches the main checkout's services, not new ones).
  SERVICE_DIR=${REPO##*/}
  [[ ${STATE_DIR##*/} != .services ]] || SERVICE_DIR=$(basename -- "${STATE_DIR%/.services}")
  SERVICE_DIR=${SERVICE_DIR//[^A-Za-z0-9._-]/_}
  SERVICE_DIR=$SERVICES_ROOT/${SERVICE_DIR:0:24}-$(printf '%s' "$STATE_DIR" | sha256sum | cut -c1-12)
fi

PG_PORT=${SYMBOLS_PG_PORT:-54329}
ES_PORT=${SYMBOLS_ES_PORT:-9201}
ES_TRANSPORT_PORT=${SYMBOLS_ES_TRANSPORT_PORT:-9301-9399}
S3_PORT=${SYMBOLS_S3_PORT:-9444}
PGB_PORT=${SYMBOLS_PGB_PORT:-54339}
PGS_PORT=${SYMBOLS_PGS_PORT:-54349}
ESC_PORT=${SYMBOLS_ESC_PORT:-9211}
ESC_TRANSPORT_PORT=${SYMBOLS_ESC_TRANSPORT_PORT:-9311}
ESC_NODES=${SYMBOLS_ESC_NODES:-3}
case ${SYMBOLS_PG_FAST:-0} in
  "" | 0 | false | no) PG_FAST=0 ;;
  *) PG_FAST=1 ;;
esac

DB_USER=crontabber
DB_PASSWORD=crontabber
DB_NAME=crontabber
S3_ACCESS_KEY=symbols
S3_SECRET_KEY=symbols-secret

PG_VERSION=15
PG_BIN=/usr/lib/postgresql/$PG_VERSION/bin
ES_VERSION=8.19.21
ES_OS_USER=symbols-es
S3PROXY_VERSION=4.1.0
M2_REPO=${SYMBOLS_M2_REPO:-${HOME:-/root}/.m2/repository}

ALL_SERVICES=(pg pgb es s3)

# ---------------------------------------------------------------- helpers ---

log() { printf '%s: %s\n' "$1" "$2" >&2; }
# die [SERVICE] MESSAGE
die() {
  if (($# > 1)); then log "$1" "$2"; else log services "$1"; fi
  exit 1
}

now_ms() { date +%s%3N; }
# Seconds since $1 (a now_ms value), one decimal: "14.2s".
since() {
  local ms=$(($(now_ms) - $1))
  printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100))
}

# True if process $1 exists and is not a zombie.  (Stopped daemons are
# reparented to PID 1; if PID 1 does not reap, they linger as zombies.)
proc_alive() {
  local stat
  [[ -n ${1:-} ]] || return 1
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

# Print the pid recorded in pid file $1 if that process is alive AND its
# command line contains $2.  The second check guards against a stale pid file
# whose pid has been reused by an unrelated process: we never signal those.
pidfile_pid() {
  local file=$1 marker=$2 pid
  [[ -r $file ]] || return 1
  pid=$(head -n1 "$file" 2>/dev/null | tr -dc 0-9)
  [[ -n $pid ]] && proc_alive "$pid" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$marker" || return 1
  echo "$pid"
}

# Send SIGTERM to $1, wait up to $2 seconds for it to exit, then SIGKILL.
kill_and_wait() {
  local pid=$1 timeout=$2 i
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < timeout * 10; i++)); do
    proc_alive "$pid" || return 0
    sleep 0.1
  done
  log "$3" "pid $pid still alive after ${timeout}s, sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    proc_alive "$pid" || return 0
    sleep 0.1
  done
  return 1
}

# True if something accepts TCP connections on 127.0.0.1:$1.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_for NAME TIMEOUT PID CMD...: poll CMD until it succeeds; give up early
# if PID (when non-empty) dies, or after TIMEOUT seconds.
wait_for() {
  local name=$1 timeout=$2 pid=$3 deadline
  shift 3
  deadline=$(($(date +%s) + timeout))
  until "$@"; do
    if [[ -n $pid ]] && ! proc_alive "$pid"; then
      log "$name" "process $pid exited during startup"
      return 1
    fi
    if (($(date +%s) >= deadline)); then
      log "$name" "not answering after ${timeout}s"
      return 1
    fi
    sleep 0.3
  done
}

# service_status NAME PID_FUNCTION READY_FUNCTION URL [NOTE]: the service's status line;
# non-zero unless it runs and answers.
service_status() {
  local name=$1 pid_function=$2 ready_function=$3 url=$4 note=${5:-} pid
  if pid=$("$pid_function") && "$ready_function"; then
    echo "$name: running pid $pid $url${note:+ ($note)}"
  elif [[ -n ${pid:-} ]]; then
    echo "$name: not answering pid $pid $url"
    return 1
  else
    echo "$name: stopped"
    return 1
  fi
}

show_log_tail() {
  local f
  for f in "$@"; do
    [[ -s $f ]] || continue
    printf -- '--- last lines of %s ---\n' "$f" >&2
    tail -n 40 "$f" >&2
  done
}

# Run a command as another OS user from /, so that an unreadable cwd (e.g.
# /root) does not produce "could not change directory" errors.
as_user() {
  local user=$1
  shift
  (cd / && runuser -u "$user" -- "$@")
}

APT_UPDATED=0
apt_install() {
  log setup "installing $* with apt-get"
  if [[ $APT_UPDATED = 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null >&2
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" </dev/null >&2
}

# Tools every service needs; a fresh machine of this kind has them all, but a
# missing one costs one apt-get run instead of a confusing failure later.
ensure_tools() {
  local -a missing=()
  command -v curl >/dev/null || missing+=(curl)
  command -v flock >/dev/null || missing+=(util-linux)
  command -v runuser >/dev/null || missing+=(util-linux)
  if ((${#missing[@]})); then apt_install "${missing[@]}"; fi
}

# The dashboard's browser tests drive Debian's headless chromium through
# Debian's chromium-driver: one source package, so their versions always match.
ensure_browser() {
  local -a missing=()
  [[ -x /usr/bin/chromium ]] || missing+=(chromium)
  [[ -x /usr/bin/chromedriver ]] || missing+=(chromium-driver)
  if ((${#missing[@]})); then apt_install "${missing[@]}"; fi
  [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]] ||
    die setup "chromium or chromedriver missing after apt-get install"
}

# `make stress` loads the CPUs with Debian's stress-ng while the timing-sensitive
# tests run (scripts/stress.py).
ensure_stress() {
  command -v stress-ng >/dev/null || apt_install stress-ng
  command -v stress-ng >/dev/null || die setup "stress-ng missing after apt-get install"
}

JAVA17_HOME=
find_java17() {
  local c
  for c in "${SYMBOLS_JAVA_HOME:-}" /usr/lib/jvm/java-17-openjdk-amd64 \
    /usr/lib/jvm/java-17-openjdk-* /usr/lib/jvm/*-17-*; do
    if [[ -n $c && -x $c/bin/java ]]; then
      JAVA17_HOME=$c
      return 0
    fi
  done
  return 1
}
ensure_java17() {
  [[ -n $JAVA17_HOME ]] && return 0
  find_java17 || { apt_install openjdk-17-jre-headless && find_java17; } ||
    die setup "no JDK 17 found under /usr/lib/jvm (set SYMBOLS_JAVA_HOME)"
}

# Fetch one artifact into the local Maven repository.  Callers run these one
# after the other (never in parallel): two mvn runs on an empty local
# repository race each other on the plugin downloads.
mvn_get() {
  local artifact=$1 mvnlog=$2 attempt
  command -v mvn >/dev/null || apt_install maven
  ensure_java17
  for attempt in 1 2 3; do
    # -B -Dstyle.color=never: no progress bars or ANSI codes under CI.
    # -C: fail on a checksum mismatch instead of warning.
    if JAVA_HOME=$JAVA17_HOME mvn -B -q -C -Dstyle.color=never \
      -Dmaven.repo.local="$M2_REPO" dependency:get -Dartifact="$artifact" \
      -Dtransitive=false </dev/null >>"$mvnlog" 2>&1; then
      return 0
    fi
    show_log_tail "$mvnlog"
    log mvn "download of $artifact failed (attempt $attempt)"
    sleep $((attempt * 3))
  done
  return 1
}

# ------------------------------------------------------------- PostgreSQL ---

PG_DIR=$SERVICE_DIR/pg
PG_DATA=$PG_DIR/data
PG_SOCK=$PG_DIR/run
PG_LOG=$PG_DIR/logs/postgresql.log

pg_pid() { pidfile_pid "$PG_DATA/postmaster.pid" "$PG_DATA"; }
pg_ready() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 2; }
pg_url() { echo "postgresql://$DB_USER@127.0.0.1:$PG_PORT/$DB_NAME"; }

pg_ensure_installed() {
  [[ -x $PG_BIN/initdb ]] || apt_install "postgresql-$PG_VERSION"
  [[ -x $PG_BIN/initdb ]] || die pg "$PG_BIN/initdb missing after install"
}

pg_init() {
  [[ -s $PG_DATA/PG_VERSION ]] && return 0
  local t0
  t0=$(now_ms)
  # The postgres user must be able to reach its directories.
  as_user postgres test -x "$PG_DIR" ||
    die pg "user postgres cannot enter $PG_DIR (check the parent directories' permissions)"
  # A unix socket path is limited to 107 bytes.
  ((${#PG_SOCK} < 90)) || die pg "socket dir path too long: $PG_SOCK (use a shorter SYMBOLS_STATE_DIR)"
  rm -rf "$PG_DATA" # a half-finished initdb
  install -d -o postgres -g postgres -m 700 "$PG_DATA"
  as_user postgres "$PG_BIN/initdb" -D "$PG_DATA" -U postgres -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >"$PG_DIR/logs/initdb.log" 2>&1 ||
    { show_log_tail "$PG_DIR/logs/initdb.log"; die pg "initdb failed"; }
  # Our settings live in symbols.conf (rewritten on every start), included last
  # so that they win over initdb's postgresql.conf.
  echo "include_if_exists = 'symbols.conf'" >>"$PG_DATA/postgresql.conf"
  log pg "initialised cluster in $(since "$t0")"
}

# (Re)write the configuration on every start, so that the port, the socket dir
# and the --fast switch always match this invocation.  The --fast settings are
# all reloadable, so a running server switches mode on `pg_ctl reload`.
pg_write_config() {
  local conf=$PG_DATA/symbols.conf
  cat >"$conf" <<EOF
# Written by scripts/services.sh on every start: edits here are overwritten.
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_SOCK'
# Tests start ~20 concurrent processes, each with a few connections.
max_connections = 200
# Modest tuning for a 2-core machine.
shared_buffers = 256MB
effective_cache_size = 1GB
work_mem = 8MB
maintenance_work_mem = 128MB
max_worker_processes = 4
max_parallel_workers_per_gather = 1
max_parallel_workers = 2
timezone = 'UTC'
log_timezone = 'UTC'
EOF
  if [[ $PG_FAST = 1 ]]; then
    cat >>"$conf" <<EOF
# --fast / SYMBOLS_PG_FAST=1: unsafe on crash, for tests only.
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
  fi
  # Passwords over TCP for everyone; trust only for the postgres superuser over
  # the private socket (the socket dir is not world-reachable to other users'
  # clusters, and this is how the script itself administers the cluster).
  cat >"$PG_DATA/pg_hba.conf" <<EOF
# Written by scripts/services.sh on every start.
# TYPE  DATABASE  USER      ADDRESS         METHOD
local   all       postgres                  trust
local   replication postgres                trust
local   all       all                       scram-sha-256
host    all       all       127.0.0.1/32    scram-sha-256
host    all       all       ::1/128         scram-sha-256
EOF
  chown postgres:postgres "$conf" "$PG_DATA/pg_hba.conf"
  chmod 600 "$conf" "$PG_DATA/pg_hba.conf"
}

# Role and database, idempotently (cheap enough to run on every start).
pg_bootstrap() {
  as_user postgres "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCK" -p "$PG_PORT" \
    -U postgres -d postgres >/dev/null <<SQL
SELECT 'CREATE ROLE $DB_USER' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$DB_USER') \gexec
ALTER ROLE $DB_USER LOGIN CREATEDB NOSUPERUSER PASSWORD '$DB_PASSWORD';
SELECT 'CREATE DATABASE $DB_NAME OWNER $DB_USER' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '$DB_NAME') \gexec
ALTER DATABASE $DB_NAME OWNER TO $DB_USER;
ALTER DATABASE $DB_NAME SET timezone TO 'UTC';
SQL
}

pg_start() {
  local t0 pid mode=""
  t0=$(now_ms)
  if [[ ${1:-} = implied ]] && pid=$(pg_pid); then
    # Named only for pgb or pgs: the running primary keeps its settings (--fast or not).
    wait_for pg 60 "$pid" pg_ready
    log pg "already running, pid $pid"
    return 0
  fi
  [[ $PG_FAST = 1 ]] && mode=" (fast: fsync=off, FOR TESTS ONLY)"
  pg_ensure_installed
  install -d -m 755 "$PG_DIR"
  install -d -o postgres -g postgres -m 755 "$PG_DIR/logs" "$PG_SOCK"
  pg_init
  pg_write_config
  if pid=$(pg_pid); then
    # Already running: just pick up the (possibly changed) --fast settings.
    as_user postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" reload -s 9>&-
    wait_for pg 60 "$pid" pg_ready
    pg_bootstrap
    log pg "already running, pid $pid$mode"
    return 0
  fi
  ! port_busy "$PG_PORT" || die pg "port $PG_PORT is taken by another process (set SYMBOLS_PG_PORT)"
  # 9>&-: the postmaster must not inherit (and hold forever) our lock fd.
  if ! as_user postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t 90 -s start 9>&-; then
    show_log_tail "$PG_LOG"
    die pg "pg_ctl start failed"
  fi
  wait_for pg 60 "" pg_ready || { show_log_tail "$PG_LOG"; die pg "not answering"; }
  pg_bootstrap
  log pg "started in $(since "$t0"), pid $(pg_pid), port $PG_PORT$mode"
}

pg_stop() {
  local pid
  if ! pid=$(pg_pid); then
    log pg "not running"
    return 0
  fi
  # -m fast: roll back open transactions and disconnect clients; -w waits until
  # the postmaster (and therefore every backend) has exited.
  if ! as_user postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 -s stop 9>&-; then
    as_user postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w -t 30 -s stop 9>&- || true
  fi
  if proc_alive "$pid"; then
    kill_and_wait "$pid" 10 pg || die pg "could not stop pid $pid"
  fi
  log pg "stopped (pid $pid)"
}

pg_status() {
  local pid
  if pid=$(pg_pid) && pg_ready; then
    local note=""
    grep -q '^fsync = off' "$PG_DATA/symbols.conf" 2>/dev/null && note=" (fast: fsync=off)"
    echo "pg: running pid $pid $(pg_url)$note"
  elif [[ -n ${pid:-} ]]; then
    echo "pg: not answering pid $pid $(pg_url)"
    return 1
  else
    echo "pg: stopped"
    return 1
  fi
}

# ---------------------------------------------------- PostgreSQL standby ---

# A streaming standby of the local PostgreSQL (a second cluster on another port),
# as a primary/standby deployment has: `start pgs` makes it anew from a
# pg_basebackup of the running primary each time it is not running (a standby left
# stopped, or promoted by a drill, is never resumed: it is rebuilt), so it is always
# a fresh hot standby replaying the primary's WAL. `promote pgs` promotes it
# (pg_ctl promote: it then takes writes). Asynchronous unless the primary names it
# in synchronous_standby_names (its application_name is `pgs`).
PGS_DIR=$SERVICE_DIR/pgs
PGS_DATA=$PGS_DIR/data
PGS_SOCK=$PGS_DIR/run
PGS_LOG=$PGS_DIR/logs/postgresql.log

pgs_pid() { pidfile_pid "$PGS_DATA/postmaster.pid" "$PGS_DATA"; }
pgs_ready() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PGS_PORT" -t 2; }
pgs_url() { echo "postgresql://$DB_USER@127.0.0.1:$PGS_PORT/$DB_NAME"; }
pgs_in_recovery() {
  as_user postgres "$PG_BIN/psql" -X -qAt -h "$PGS_SOCK" -p "$PGS_PORT" -U postgres -d postgres \
    -c "SELECT pg_is_in_recovery()" 2>/dev/null
}

# The standby's replication slot on the primary (`pgs`): the primary keeps the WAL the
# standby has not received yet, so a standby on a loaded machine falls behind a busy primary
# (every test database a WAL-logged copy of a template) instead of losing its stream
# ("requested WAL segment ... has already been removed"). Dropped whenever the standby is
# not running (start, stop): an unused slot would keep the primary's WAL forever.
pgs_drop_slot() {
  as_user postgres "$PG_BIN/psql" -X -qAt -h "$PG_SOCK" -p "$PG_PORT" -U postgres -d postgres \
    -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
        WHERE slot_name = 'pgs' AND NOT active" >/dev/null 2>&1 || true
}

pgs_start() {
  local t0 pid
  t0=$(now_ms)
  if pid=$(pgs_pid); then
    log pgs "already running, pid $pid"
    return 0
  fi
  pg_pid >/dev/null || die pgs "the primary is not running (start pg first)"
  ! port_busy "$PGS_PORT" || die pgs "port $PGS_PORT is taken by another process (set SYMBOLS_PGS_PORT)"
  ((${#PGS_SOCK} < 90)) || die pgs "socket dir path too long: $PGS_SOCK"
  rm -rf "$PGS_DIR"
  install -d -m 755 "$PGS_DIR"
  install -d -o postgres -g postgres -m 755 "$PGS_DIR/logs" "$PGS_SOCK"
  install -d -o postgres -g postgres -m 700 "$PGS_DATA"
  pgs_drop_slot
  # -R: standby.signal and primary_conninfo (over the primary's socket, as postgres);
  # -X stream: the WAL of the copy comes with it; -c fast: an immediate checkpoint;
  # -C -S pgs: the slot (above), named in the standby's primary_slot_name.
  if ! as_user postgres "$PG_BIN/pg_basebackup" -h "$PG_SOCK" -p "$PG_PORT" -U postgres \
    -D "$PGS_DATA" -R -X stream -c fast -C -S pgs -d "application_name=pgs" \
    >"$PGS_DIR/logs/basebackup.log" 2>&1; then
    show_log_tail "$PGS_DIR/logs/basebackup.log"
    die pgs "pg_basebackup failed"
  fi
  # The copy carries the primary's symbols.conf: this cluster's own port and socket.
  cat >"$PGS_DATA/symbols.conf" <<EOF
# Written by scripts/services.sh: the standby's own settings (a copy of the primary's, then these).
$(grep -v '^port\|^unix_socket_directories\|^shared_buffers\|^#' "$PG_DATA/symbols.conf")
port = $PGS_PORT
unix_socket_directories = '$PGS_SOCK'
shared_buffers = 64MB
hot_standby = on
EOF
  chown postgres:postgres "$PGS_DATA/symbols.conf"
  if ! as_user postgres "$PG_BIN/pg_ctl" -D "$PGS_DATA" -l "$PGS_LOG" -w -t 90 -s start 9>&-; then
    show_log_tail "$PGS_LOG"
    die pgs "pg_ctl start failed"
  fi
  wait_for pgs 60 "" pgs_ready || { show_log_tail "$PGS_LOG"; die pgs "not answering"; }
  [[ $(pgs_in_recovery) = t ]] || die pgs "started, but not in recovery"
  log pgs "standby of port $PG_PORT started in $(since "$t0"), pid $(pgs_pid), port $PGS_PORT"
}

pgs_promote() {
  pgs_pid >/dev/null || die pgs "not running"
  as_user postgres "$PG_BIN/pg_ctl" -D "$PGS_DATA" -w -t 60 -s promote 9>&- || die pgs "promote failed"
  log pgs "promoted: port $PGS_PORT takes writes"
}

pgs_stop() {
  local pid
  if ! pid=$(pgs_pid); then
    pgs_drop_slot
    log pgs "not running"
    return 0
  fi
  as_user postgres "$PG_BIN/pg_ctl" -D "$PGS_DATA" -m fast -w -t 60 -s stop 9>&- ||
    as_user postgres "$PG_BIN/pg_ctl" -D "$PGS_DATA" -m immediate -w -t 30 -s stop 9>&- || true
  if proc_alive "$pid"; then
    kill_and_wait "$pid" 10 pgs || die pgs "could not stop pid $pid"
  fi
  pgs_drop_slot
  log pgs "stopped (pid $pid)"
}

pgs_status() {
  local pid role
  if pid=$(pgs_pid) && pgs_ready; then
    role=standby
    [[ $(pgs_in_recovery) = t ]] || role="promoted: takes writes"
    echo "pgs: running pid $pid $(pgs_url) ($role)"
  elif [[ -n ${pid:-} ]]; then
    echo "pgs: not answering pid $pid $(pgs_url)"
    return 1
  else
    echo "pgs: stopped"
    return 1
  fi
}

# -------------------------------------------------------------- PgBouncer ---

# PgBouncer in front of the local PostgreSQL, as the users of a symbol server deploy
# it: transaction pooling, Debian's package (1.18 on Debian 12: it refuses the
# `options` startup parameter, which 1.20 learned), otherwise its stock settings.
# Every database name reaches the same-named database (`* =`), so the tests'
# per-test databases work through it. Runs as the postgres OS user (it refuses
# root). The `pgbouncer` admin database answers SHOW commands to $DB_USER
# (stats_users), which is how a test proves its traffic went through it.
PGB_DIR=$SERVICE_DIR/pgbouncer
PGB_CONF=$PGB_DIR/pgbouncer.ini
PGB_PIDFILE=$PGB_DIR/run/pgbouncer.pid
PGB_LOG=$PGB_DIR/logs/pgbouncer.log
PGB_BIN=/usr/sbin/pgbouncer

pgb_pid() { pidfile_pid "$PGB_PIDFILE" "$PGB_CONF"; }
pgb_ready() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PGB_PORT" -t 2; }
pgb_url() { echo "postgresql://$DB_USER@127.0.0.1:$PGB_PORT/$DB_NAME"; }

pgb_ensure_installed() {
  [[ -x $PGB_BIN ]] || apt_install pgbouncer
  [[ -x $PGB_BIN ]] || die pgb "$PGB_BIN missing after install"
}

pgb_write_config() {
  install -d -m 755 "$SERVICE_DIR"
  install -d -o postgres -g postgres -m 750 "$PGB_DIR" "$PGB_DIR/run" "$PGB_DIR/logs"
  cat >"$PGB_CONF" <<EOF
; Written by scripts/services.sh on every start: edits here are overwritten.
; PgBouncer's stock settings but for where it listens, where PostgreSQL is, the
; pool mode and who may log in (docs/deploy.md shows a production file).
[databases]
* = host=127.0.0.1 port=$PG_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PGB_PORT
unix_socket_dir =
pool_mode = transaction
auth_type = scram-sha-256
auth_file = $PGB_DIR/userlist.txt
stats_users = $DB_USER
pidfile = $PGB_PIDFILE
logfile = $PGB_LOG
EOF
  (umask 077 && printf '"%s" "%s"\n' "$DB_USER" "$DB_PASSWORD" >"$PGB_DIR/userlist.txt")
  chown postgres:postgres "$PGB_CONF" "$PGB_DIR/userlist.txt"
  chmod 640 "$PGB_CONF"
}

pgb_start() {
  local t0 pid
  t0=$(now_ms)
  pgb_ensure_installed
  pgb_write_config
  if pid=$(pgb_pid); then
    # SIGHUP: reload the rewritten configuration (the PostgreSQL port may have changed).
    kill -HUP "$pid"
    wait_for pgb 30 "$pid" pgb_ready || die pgb "running (pid $pid) but not answering"
    log pgb "already running, pid $pid"
    return 0
  fi
  ! port_busy "$PGB_PORT" || die pgb "port $PGB_PORT is taken by another process (set SYMBOLS_PGB_PORT)"
  rm -f "$PGB_PIDFILE"
  # -d: daemonize once listening. 9>&-: the daemon must not inherit our lock fd.
  if ! as_user postgres "$PGB_BIN" -q -d "$PGB_CONF" </dev/null 9>&- 2>>"$PGB_LOG.start"; then
    show_log_tail "$PGB_LOG.start" "$PGB_LOG"
    die pgb "pgbouncer failed to start"
  fi
  wait_for pgb 30 "" pgb_ready || { show_log_tail "$PGB_LOG"; die pgb "not answering"; }
  log pgb "started in $(since "$t0"), pid $(pgb_pid), port $PGB_PORT (transaction pooling)"
}

pgb_stop() { stop_by_pidfile pgb pgb_pid "$PGB_PIDFILE" 30; }

pgb_status() { service_status pgb pgb_pid pgb_ready "$(pgb_url)" "transaction pooling"; }

# ---------------------------------------------------------- Elasticsearch ---

ES_ZIP=$M2_REPO/org/elasticsearch/distribution/integ-test-zip/elasticsearch/$ES_VERSION/elasticsearch-$ES_VERSION.zip
ES_HOME=$SERVICE_DIR/cache/elasticsearch-$ES_VERSION
ES_DIR=$SERVICE_DIR/es
ES_CONF=$ES_DIR/config
ES_PIDFILE=$ES_DIR/run/elasticsearch.pid
ES_STARTUP_LOG=$ES_DIR/logs/startup.log

ES_SERVER_LOG=$ES_DIR/logs/symbols-dev.log # named after cluster.name

# The server JVM's command line names its tmp dir (ES_TMPDIR), which is ours
# alone: this identifies OUR node.  (ES_PATH_CONF does not appear in it.)
es_pid() { pidfile_pid "$ES_PIDFILE" "-Djava.io.tmpdir=$ES_DIR/tmp"; }
es_ready() {
  curl -fsS -m 5 -o /dev/null \
    "http://127.0.0.1:$ES_PORT/_cluster/health?wait_for_status=yellow&timeout=2s" 2>/dev/null
}
es_url() { echo "http://127.0.0.1:$ES_PORT"; }

# Download (once, into the Maven repository) and unpack (once, into the cache).
es_fetch() {
  local t0 tmp
  [[ -x $ES_HOME/bin/elasticsearch ]] && return 0
  if [[ ! -s $ES_ZIP ]]; then
    t0=$(now_ms)
    log es "downloading elasticsearch $ES_VERSION (integ-test-zip, ~107 MB) from Maven Central"
    install -d -m 755 "$ES_DIR" "$ES_DIR/logs"
    mvn_get "org.elasticsearch.distribution.integ-test-zip:elasticsearch:$ES_VERSION:zip" \
      "$ES_DIR/logs/mvn.log" ||
      die es "download failed"
    [[ -s $ES_ZIP ]] || die es "mvn succeeded but $ES_ZIP is missing"
    log es "downloaded in $(since "$t0")"
  fi
  command -v unzip >/dev/null || apt_install unzip
  t0=$(now_ms)
  # Unpack into a temporary dir and rename, so an interrupted unzip never
  # leaves a half-populated ES_HOME behind.
  install -d -m 755 "$SERVICE_DIR/cache"
  tmp=$(mktemp -d "$SERVICE_DIR/cache/.unpack-es.XXXXXX")
  unzip -q "$ES_ZIP" -d "$tmp"
  [[ -x $tmp/elasticsearch-$ES_VERSION/bin/elasticsearch ]] || die es "unexpected layout in $ES_ZIP"
  chmod 755 "$tmp"
  mv "$tmp/elasticsearch-$ES_VERSION" "$ES_HOME"
  rmdir "$tmp"
  log es "unpacked in $(since "$t0")"
}

# Elasticsearch refuses to run as root: run it as a dedicated system user.
es_ensure_user() {
  id -u "$ES_OS_USER" >/dev/null 2>&1 && return 0
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin "$ES_OS_USER"
}

es_write_config() {
  # The distribution stays pristine (owned by root, read-only for ES); config,
  # data, logs, tmp and the pid file live under $ES_DIR, owned by the ES user.
  install -d -m 755 "$ES_DIR"
  install -d -o "$ES_OS_USER" -g "$ES_OS_USER" -m 750 \
    "$ES_CONF" "$ES_DIR/data" "$ES_DIR/logs" "$ES_DIR/tmp" "$ES_DIR/run"
  cp -r "$ES_HOME/config/." "$ES_CONF/"
  # Only settings this distribution knows: unknown ones (e.g. xpack.ml.enabled)
  # are fatal, since the integ-test-zip ships just a handful of modules.
  cat >"$ES_CONF/elasticsearch.yml" <<EOF
# Written by scripts/services.sh on every start: edits here are overwritten.
cluster.name: symbols-dev
node.name: symbols-dev-1
path.data: $ES_DIR/data
path.logs: $ES_DIR/logs
network.host: 127.0.0.1
http.port: $ES_PORT
# A range: another Elasticsearch on the machine may hold 9300.
transport.port: $ES_TRANSPORT_PORT
discovery.type: single-node
xpack.security.enabled: false
# Disks here have been seen nearly full: do not turn indices read-only.
cluster.routing.allocation.disk.threshold_enabled: false
# Lets test teardown delete indices by wildcard.
action.destructive_requires_name: false
EOF
  chown -R "$ES_OS_USER:$ES_OS_USER" "$ES_CONF"
}

es_heap_opts() {
  local heap=${SYMBOLS_ES_HEAP:-}
  if [[ -z $heap ]]; then
    # Never ES's default, which sizes the heap from all of the machine's RAM.
    echo "-Xms512m -Xmx1g"
  elif [[ $heap = -* ]]; then
    echo "$heap"
  else
    echo "-Xms$heap -Xmx$heap"
  fi
}

# Start the node in the background (bin/elasticsearch -d returns once the node
# has started); es_wait then waits for the cluster health.
es_launch() {
  local t0 pid
  t0=$(now_ms)
  if pid=$(es_pid); then
    ES_ALREADY=$pid
    return 0
  fi
  ES_ALREADY=
  es_fetch
  ensure_java17
  es_ensure_user
  ! port_busy "$ES_PORT" || die es "port $ES_PORT is taken by another process (set SYMBOLS_ES_PORT)"
  es_write_config
  as_user "$ES_OS_USER" test -r "$ES_HOME/bin/elasticsearch" -a -x "$ES_DIR" ||
    die es "user $ES_OS_USER cannot reach $ES_DIR (check the parent directories' permissions)"
  # With single-node discovery a low value only warns; in a container the
  # sysctl may be read-only, which is fine.
  if (($(cat /proc/sys/vm/max_map_count 2>/dev/null || echo 0) < 262144)); then
    sysctl -q -w vm.max_map_count=262144 >/dev/null 2>&1 ||
      log es "warning: could not raise vm.max_map_count (continuing)"
  fi
  rm -f "$ES_PIDFILE"
  log es "starting on port $ES_PORT (heap: $(es_heap_opts))"
  # ES_JAVA_HOME: this distribution has no bundled JDK and ignores JAVA_HOME.
  # -p: the pid file is written by the server JVM itself (not the launcher).
  # 9>&-: the daemon must not inherit (and hold forever) our lock fd.
  if ! as_user "$ES_OS_USER" env \
    ES_JAVA_HOME="$JAVA17_HOME" ES_PATH_CONF="$ES_CONF" ES_TMPDIR="$ES_DIR/tmp" \
    ES_JAVA_OPTS="$(es_heap_opts)" \
    "$ES_HOME/bin/elasticsearch" -d -p "$ES_PIDFILE" \
    </dev/null >"$ES_STARTUP_LOG" 2>&1 9>&-; then
    show_log_tail "$ES_STARTUP_LOG"
    die es "bin/elasticsearch failed"
  fi
  ES_T0=$t0
}

es_wait() {
  local pid
  if [[ -n ${ES_ALREADY:-} ]]; then
    wait_for es 120 "$ES_ALREADY" es_ready || die es "running (pid $ES_ALREADY) but not healthy"
    log es "already running, pid $ES_ALREADY"
    return 0
  fi
  pid=$(es_pid) || { show_log_tail "$ES_SERVER_LOG"; die es "no live process in $ES_PIDFILE"; }
  wait_for es 180 "$pid" es_ready || { show_log_tail "$ES_SERVER_LOG"; die es "did not become healthy"; }
  log es "started in $(since "$ES_T0"), pid $pid, port $ES_PORT"
}

# stop_by_pidfile NAME PID_FUNCTION PIDFILE TIMEOUT: TERM (then KILL) the process
# PID_FUNCTION vouches for, and remove its pid file.
stop_by_pidfile() {
  local name=$1 pid_function=$2 pidfile=$3 timeout=$4 pid
  if ! pid=$("$pid_function"); then
    log "$name" "not running"
    rm -f "$pidfile"
    return 0
  fi
  kill_and_wait "$pid" "$timeout" "$name" || die "$name" "could not stop pid $pid"
  rm -f "$pidfile"
  log "$name" "stopped (pid $pid)"
}

es_stop() { stop_by_pidfile es es_pid "$ES_PIDFILE" 60; }

es_status() {
  local pid health
  if pid=$(es_pid); then
    health=$(curl -fsS -m 5 "http://127.0.0.1:$ES_PORT/_cluster/health" 2>/dev/null |
      sed -n 's/.*"status":"\([a-z]*\)".*/\1/p') || true
    if [[ $health = green || $health = yellow ]]; then
      echo "es: running pid $pid $(es_url) ($health)"
    else
      echo "es: not answering pid $pid $(es_url)"
      return 1
    fi
  else
    echo "es: stopped"
    return 1
  fi
}

# ------------------------------------------------- Elasticsearch cluster ---

# A cluster of $ESC_NODES nodes (3 by default) of the same distribution, on this machine,
# apart from the single node `es`: cluster.name symbols-cluster, node i on HTTP port
# $ESC_PORT + i - 1 and transport port $ESC_TRANSPORT_PORT + i - 1, every node master-
# eligible and a data node, small heaps ($SYMBOLS_ESC_HEAP, default 256m). For the drills
# and tests of a deployment on a cluster (replicas, a node lost); not started unless named:
# `start esc`. `kill esc N` kills node N (SIGKILL, as a crash), `start esc` brings it back.
ESC_DIR=$SERVICE_DIR/esc

esc_node_dir() { echo "$ESC_DIR/node-$1"; }
esc_pid() { pidfile_pid "$(esc_node_dir "$1")/run/elasticsearch.pid" "-Djava.io.tmpdir=$(esc_node_dir "$1")/tmp"; }
esc_port() { echo $((ESC_PORT + $1 - 1)); }
esc_urls() {
  local n urls=()
  for ((n = 1; n <= ESC_NODES; n++)); do urls+=("http://127.0.0.1:$(esc_port "$n")"); done
  (IFS=,; echo "${urls[*]}")
}
esc_health() {
  # Any node that answers: the cluster's status (green, yellow, red), or nothing.
  local n
  for ((n = 1; n <= ESC_NODES; n++)); do
    curl -fsS -m 3 "http://127.0.0.1:$(esc_port "$n")/_cluster/health" 2>/dev/null |
      sed -n 's/.*"status":"\([a-z]*\)".*/\1/p' && return 0
  done
  return 1
}
esc_ready() {
  local n=$1
  curl -fsS -m 5 -o /dev/null \
    "http://127.0.0.1:$(esc_port "$n")/_cluster/health?wait_for_nodes=$ESC_NODES&wait_for_status=yellow&timeout=2s" \
    2>/dev/null
}

esc_write_config() {
  local n=$1 dir seeds=() masters=() i
  dir=$(esc_node_dir "$n")
  for ((i = 1; i <= ESC_NODES; i++)); do
    seeds+=("\"127.0.0.1:$((ESC_TRANSPORT_PORT + i - 1))\"")
    masters+=("\"symbols-cluster-$i\"")
  done
  install -d -m 755 "$ESC_DIR" "$dir"
  install -d -o "$ES_OS_USER" -g "$ES_OS_USER" -m 750 \
    "$dir/config" "$dir/data" "$dir/logs" "$dir/tmp" "$dir/run"
  cp -r "$ES_HOME/config/." "$dir/config/"
  cat >"$dir/config/elasticsearch.yml" <<EOF
# Written by scripts/services.sh on every start: edits here are overwritten.
cluster.name: symbols-cluster
node.name: symbols-cluster-$n
path.data: $dir/data
path.logs: $dir/logs
network.host: 127.0.0.1
http.port: $(esc_port "$n")
transport.port: $((ESC_TRANSPORT_PORT + n - 1))
discovery.seed_hosts: [$(IFS=,; echo "${seeds[*]}")]
cluster.initial_master_nodes: [$(IFS=,; echo "${masters[*]}")]
xpack.security.enabled: false
cluster.routing.allocation.disk.threshold_enabled: false
action.destructive_requires_name: false
EOF
  chown -R "$ES_OS_USER:$ES_OS_USER" "$dir/config"
}

esc_launch_node() {
  local n=$1 dir heap=${SYMBOLS_ESC_HEAP:-256m}
  dir=$(esc_node_dir "$n")
  esc_pid "$n" >/dev/null && return 0
  ! port_busy "$(esc_port "$n")" || die esc "port $(esc_port "$n") is taken by another process (set SYMBOLS_ESC_PORT)"
  esc_write_config "$n"
  rm -f "$dir/run/elasticsearch.pid"
  if ! as_user "$ES_OS_USER" env \
    ES_JAVA_HOME="$JAVA17_HOME" ES_PATH_CONF="$dir/config" ES_TMPDIR="$dir/tmp" \
    ES_JAVA_OPTS="-Xms$heap -Xmx$heap" \
    "$ES_HOME/bin/elasticsearch" -d -p "$dir/run/elasticsearch.pid" \
    </dev/null >"$dir/logs/startup.log" 2>&1 9>&-; then
    show_log_tail "$dir/logs/startup.log"
    die esc "node $n: bin/elasticsearch failed"
  fi
}

esc_start() {
  local t0 n pid
  t0=$(now_ms)
  es_fetch
  ensure_java17
  es_ensure_user
  if (($(cat /proc/sys/vm/max_map_count 2>/dev/null || echo 0) < 262144)); then
    sysctl -q -w vm.max_map_count=262144 >/dev/null 2>&1 ||
      log esc "warning: could not raise vm.max_map_count (continuing)"
  fi
  for ((n = 1; n <= ESC_NODES; n++)); do esc_launch_node "$n"; done
  for ((n = 1; n <= ESC_NODES; n++)); do
    pid=$(esc_pid "$n") || { show_log_tail "$(esc_node_dir "$n")/logs/symbols-cluster.log"; die esc "node $n: no live process"; }
    wait_for esc 240 "$pid" esc_ready "$n" ||
      { show_log_tail "$(esc_node_dir "$n")/logs/symbols-cluster.log"; die esc "node $n did not join"; }
  done
  log esc "$ESC_NODES nodes up in $(since "$t0"): $(esc_urls)"
}

esc_kill() {
  local n=$1 pid
  pid=$(esc_pid "$n") || die esc "node $n is not running"
  kill -KILL "$pid"
  log esc "node $n killed (pid $pid)"
}

esc_stop() {
  local n pid
  [[ -d $ESC_DIR ]] || { log esc "not running"; return 0; }
  for ((n = 1; n <= ESC_NODES; n++)); do
    if pid=$(esc_pid "$n"); then
      kill_and_wait "$pid" 60 esc || die esc "could not stop node $n (pid $pid)"
      log esc "node $n stopped (pid $pid)"
    fi
    rm -f "$(esc_node_dir "$n")/run/elasticsearch.pid"
  done
}

esc_status() {
  local n pid rc=0 health
  health=$(esc_health) || health="not answering"
  for ((n = 1; n <= ESC_NODES; n++)); do
    if pid=$(esc_pid "$n"); then
      echo "esc: node $n running pid $pid http://127.0.0.1:$(esc_port "$n") (cluster $health)"
    else
      echo "esc: node $n stopped"
      rc=1
    fi
  done
  return $rc
}

# ------------------------------------------------------------- S3 (s3proxy) ---

S3_JAR=$M2_REPO/org/gaul/s3proxy/$S3PROXY_VERSION/s3proxy-$S3PROXY_VERSION-jar-with-dependencies.jar
S3_DIR=$STATE_DIR/s3
S3_CONF=$S3_DIR/s3proxy.conf
S3_PIDFILE=$S3_DIR/run/s3proxy.pid
S3_LOG=$S3_DIR/logs/s3proxy.log

s3_pid() { pidfile_pid "$S3_PIDFILE" "$S3_CONF"; }
# Any HTTP answer will do (an anonymous GET gets 403): s3proxy rejects signed
# requests that lack x-amz-content-sha256, which curl does not send.
s3_ready() {
  local code
  code=$(curl -s -m 3 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$S3_PORT/" 2>/dev/null) || true
  [[ -n $code && $code != 000 ]]
}
s3_url() { echo "http://127.0.0.1:$S3_PORT"; }

s3_fetch() {
  local t0
  [[ -s $S3_JAR ]] && return 0
  t0=$(now_ms)
  log s3 "downloading s3proxy $S3PROXY_VERSION (~55 MB) from Maven Central"
  install -d -m 755 "$S3_DIR" "$S3_DIR/logs"
  mvn_get "org.gaul:s3proxy:$S3PROXY_VERSION:jar:jar-with-dependencies" "$S3_DIR/logs/mvn.log" ||
    die s3 "download failed"
  [[ -s $S3_JAR ]] || die s3 "mvn succeeded but $S3_JAR is missing"
  log s3 "downloaded in $(since "$t0")"
}

s3_write_config() {
  install -d -m 755 "$S3_DIR" "$S3_DIR/logs" "$S3_DIR/run"
  install -d -m 700 "$S3_DIR/data"
  # Holds the secret: private.  A bucket is a directory under the basedir.
  (umask 077 && cat >"$S3_CONF") <<EOF
# Written by scripts/services.sh on every start: edits here are overwritten.
s3proxy.endpoint=http://127.0.0.1:$S3_PORT
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=$S3_ACCESS_KEY
s3proxy.credential=$S3_SECRET_KEY
jclouds.provider=filesystem
jclouds.identity=$S3_ACCESS_KEY
jclouds.credential=$S3_SECRET_KEY
jclouds.filesystem.basedir=$S3_DIR/data
EOF
}

s3_launch() {
  local t0
  t0=$(now_ms)
  if S3_ALREADY=$(s3_pid); then
    return 0
  fi
  s3_fetch
  ensure_java17
  ! port_busy "$S3_PORT" || die s3 "port $S3_PORT is taken by another process (set SYMBOLS_S3_PORT)"
  s3_write_config
  rm -f "$S3_PIDFILE"
  # setsid: own session, immune to the caller's terminal/SIGHUP.  The inner
  # shell writes its own pid and then execs java, so the pid file holds the
  # JVM's pid and no wrapper process lingers.  9>&-: do not inherit our lock fd.
  # shellcheck disable=SC2016  # $$ and $1.. are for the inner shell
  setsid bash -c 'cd "$1" && echo $$ >"$2" && shift 2 && exec "$@"' s3proxy \
    "$S3_DIR" "$S3_PIDFILE" \
    "$JAVA17_HOME/bin/java" -Xms64m -Xmx512m -jar "$S3_JAR" --properties "$S3_CONF" \
    </dev/null >>"$S3_LOG" 2>&1 9>&- &
  S3_T0=$t0
}

s3_wait() {
  local pid i
  if [[ -n ${S3_ALREADY:-} ]]; then
    wait_for s3 60 "$S3_ALREADY" s3_ready || die s3 "running (pid $S3_ALREADY) but not answering"
    log s3 "already running, pid $S3_ALREADY"
    return 0
  fi
  for ((i = 0; i < 50; i++)); do # the pid file appears within milliseconds
    pid=$(s3_pid) && break
    sleep 0.1
  done
  [[ -n ${pid:-} ]] || { show_log_tail "$S3_LOG"; die s3 "did not start"; }
  wait_for s3 60 "$pid" s3_ready || { show_log_tail "$S3_LOG"; die s3 "not answering"; }
  log s3 "started, pid $pid, port $S3_PORT (answering $(since "$S3_T0") after launch)"
}

s3_stop() { stop_by_pidfile s3 s3_pid "$S3_PIDFILE" 30; }

s3_status() { service_status s3 s3_pid s3_ready "$(s3_url)"; }

# ------------------------------------------------------------------- env ---

write_env_file() {
  local f=$STATE_DIR/env
  # Holds passwords: readable by the owner only.
  (umask 077 && cat >"$f.tmp") <<EOF
# Written by scripts/services.sh: local development services.
# PostgreSQL's and Elasticsearch's data (devservices.Services.service_dir reads it):
export SYMBOLS_SERVICE_DIR=$SERVICE_DIR
export RESOURCE_POSTGRESQL_HOST=127.0.0.1
export RESOURCE_POSTGRESQL_PORT=$PG_PORT
export RESOURCE_POSTGRESQL_USER=$DB_USER
export RESOURCE_POSTGRESQL_PASSWORD=$DB_PASSWORD
export RESOURCE_POSTGRESQL_DBNAME=$DB_NAME
# PgBouncer (transaction pooling) in front of the same PostgreSQL: point
# RESOURCE_POSTGRESQL_PORT here to run through it (make test's pooled lane does).
export SYMBOLS_PGB_PORT=$PGB_PORT
# The standby of the same PostgreSQL (started only by: services.sh start pgs).
export SYMBOLS_PGS_PORT=$PGS_PORT
# The Elasticsearch cluster's nodes (started only by: services.sh start esc).
export SYMBOLS_ESC_URLS=$(esc_urls)
export ES_URL=http://127.0.0.1:$ES_PORT
export AWS_ENDPOINT_URL_S3=http://127.0.0.1:$S3_PORT
export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY
export AWS_DEFAULT_REGION=us-east-1
EOF
  chmod 600 "$f.tmp"
  mv -f "$f.tmp" "$f"
}

# ------------------------------------------------------------------ main ---

usage() {
  echo "usage: $0 start|stop|restart|status|env [--fast] [pg|pgb|pgs|es|esc|s3 ...]" \
    "| promote pgs | kill esc N | clean | browser | stress" >&2
  exit 2
}

has() {
  local s
  for s in "${SERVICES[@]}"; do [[ $s = "$1" ]] && return 0; done
  return 1
}

# Serialize concurrent start/stop runs on a lock file in the state dir.
take_lock() {
  exec 9>>"$STATE_DIR/lock"
  if ! flock -n 9; then
    log lock "another services.sh holds $STATE_DIR/lock, waiting"
    flock -w 900 9 || die lock "timed out waiting for $STATE_DIR/lock"
  fi
}

cmd_start() {
  local t0
  t0=$(now_ms)
  # Order: PostgreSQL first (seconds); then s3proxy is fetched and launched in
  # the background, and boots while Elasticsearch is fetched and launched
  # (bin/elasticsearch -d returns once the node has started); then both are
  # waited for.  The two Maven downloads run strictly one after the other.
  if has pg; then pg_start; elif has pgb || has pgs; then pg_start implied; fi
  if has pgs; then pgs_start; fi
  if has pgb; then pgb_start; fi
  if has s3; then s3_launch; fi
  if has es; then es_launch; fi
  if has esc; then esc_start; fi
  if has s3; then s3_wait; fi
  if has es; then es_wait; fi
  write_env_file
  log services "ready in $(since "$t0"); env file: $STATE_DIR/env; pg and es data: $SERVICE_DIR"
}

# $SERVICE_DIR/checkout holds the state dir it belongs to, then a random id
# that $STATE_DIR/service-id repeats.  A state dir without that id (a clone
# deleted without `make clean`, cloned again at the same path) must not inherit
# the old clone's databases: their services are stopped and their data removed,
# as if they had gone with the old clone's .services.
ensure_service_dir() {
  local mine tmp
  [[ $SERVICE_DIR = "$STATE_DIR" ]] && return 0
  mine=$(cat "$STATE_DIR/service-id" 2>/dev/null) || true
  if [[ -e $SERVICE_DIR ]]; then
    check_service_dir_owner
    if [[ -z $mine || $(sed -n 2p "$SERVICE_DIR/checkout") != "$mine" ]]; then
      log services "$SERVICE_DIR is an earlier checkout's at this path: stopping its services, removing it"
      es_stop
      esc_stop
      pgb_stop
      pgs_stop
      pg_stop
      rm -rf -- "$SERVICE_DIR"
    fi
  fi
  [[ -e $SERVICE_DIR ]] && return 0
  [[ -n $mine ]] || mine=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
  printf '%s\n' "$mine" >"$STATE_DIR/service-id"
  # Complete (checkout file included) before it appears under its name.
  install -d -m 755 "$SERVICES_ROOT"
  tmp=$(mktemp -d "$SERVICES_ROOT/.new.XXXXXX")
  chmod 755 "$tmp"
  printf '%s\n%s\n' "$STATE_DIR" "$mine" >"$tmp/checkout"
  mv -T -- "$tmp" "$SERVICE_DIR"
}

check_service_dir_owner() {
  local owner
  owner=$(head -n1 "$SERVICE_DIR/checkout" 2>/dev/null) || true
  [[ $owner = "$STATE_DIR" ]] ||
    die "$SERVICE_DIR belongs to ${owner:-no checkout} (its checkout file), not to $STATE_DIR"
}

# Stop everything, then remove this checkout's data: $SERVICE_DIR whole (after
# checking it is ours), and in $STATE_DIR only what this script and the
# project's tools put there, so that a mistaken SYMBOLS_STATE_DIR loses nothing else.
cmd_clean() {
  cmd_stop
  if [[ $SERVICE_DIR != "$STATE_DIR" && -e $SERVICE_DIR ]]; then
    check_service_dir_owner
    rm -rf -- "$SERVICE_DIR"
    rmdir -- "$SERVICES_ROOT" 2>/dev/null || true # other checkouts' may remain
    log services "removed $SERVICE_DIR"
  fi
  rm -rf -- "$STATE_DIR"/{env,env.tmp,service-id,cache,pg,pgs,pgbouncer,es,esc,s3,lock}
  if rmdir -- "$STATE_DIR" 2>/dev/null; then
    log services "removed $STATE_DIR"
  else
    log services "kept $STATE_DIR: it holds files this script did not make"
  fi
}

cmd_stop() {
  if has s3; then s3_stop; fi
  if has es; then es_stop; fi
  if has esc || [[ ${STOP_ALL:-0} = 1 ]]; then esc_stop; fi
  if has pgb; then pgb_stop; fi
  if has pgs || [[ ${STOP_ALL:-0} = 1 ]]; then pgs_stop; fi
  if has pg; then pg_stop; fi
}

cmd_status() {
  local rc=0
  if has pg; then pg_status || rc=1; fi
  if has pgb; then pgb_status || rc=1; fi
  if has pgs; then pgs_status || rc=1; fi
  if has es; then es_status || rc=1; fi
  if has esc; then esc_status || rc=1; fi
  if has s3; then s3_status || rc=1; fi
  return $rc
}

main() {
  (($# >= 1)) || usage
  local cmd=$1 arg
  shift
  SERVICES=()
  KILL_NODE=
  for arg in "$@"; do
    if [[ $cmd = kill && $arg =~ ^[0-9]+$ ]]; then
      KILL_NODE=$arg
      continue
    fi
    case $arg in
      pg | pgb | pgs | es | esc | s3) has "$arg" 2>/dev/null || SERVICES+=("$arg") ;;
      --fast) PG_FAST=1 ;;
      *) usage ;;
    esac
  done
  # No names: all of ALL_SERVICES, and stop/clean take the standby down too.
  ((${#SERVICES[@]})) || { SERVICES=("${ALL_SERVICES[@]}") && STOP_ALL=1; }

  case $cmd in
    start | stop | restart | clean)
      ((EUID == 0)) || die "must run as root (it runs PostgreSQL and Elasticsearch as their own users)"
      [[ $cmd != clean ]] || (($# == 0)) || usage
      ensure_tools
      install -d -m 755 "$STATE_DIR"
      take_lock
      case $cmd in
        start) ensure_service_dir && cmd_start ;;
        stop) cmd_stop ;;
        restart) ensure_service_dir && cmd_stop && cmd_start ;;
        clean) cmd_clean ;;
      esac
      ;;
    promote)
      ((EUID == 0)) || die "must run as root"
      [[ ${SERVICES[*]} = pgs ]] || usage
      pgs_promote
      ;;
    kill)
      ((EUID == 0)) || die "must run as root"
      [[ ${SERVICES[*]} = esc && $KILL_NODE =~ ^[0-9]+$ ]] || usage
      esc_kill "$KILL_NODE"
      ;;
    status) cmd_status ;;
    browser)
      (($# == 0)) || usage
      ((EUID == 0)) || die "must run as root (it installs Debian packages)"
      ensure_browser
      ;;
    stress)
      (($# == 0)) || usage
      ((EUID == 0)) || die "must run as root (it installs Debian packages)"
      ensure_stress
      ;;
    env)
      install -d -m 755 "$STATE_DIR"
      write_env_file
      cat "$STATE_DIR/env"
      ;;
    *) usage ;;
  esac
}

main "$@"
