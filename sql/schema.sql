-- The whole current schema, applied idempotently on first use.
--
-- Every statement must be safe to run again on a database that already has
-- this schema, and on a database written by crontabber 0.18 (whose tables we
-- keep as they are and only add columns to). Changes to an existing schema
-- come as numbered files in sql/migrations/; a test checks that a database
-- built from this file equals one built from the migrations.

-- crontabber 0.18's state table, column for column; no primary key, a unique index.
CREATE TABLE IF NOT EXISTS crontabber (
    app_name      text NOT NULL,
    next_run      timestamptz,
    first_run     timestamptz,
    last_run      timestamptz,
    last_success  timestamptz,
    ongoing       timestamptz,
    error_count   integer DEFAULT 0,
    depends_on    text[],
    last_error    json
);
-- crontabber before 0.12 lacked this column.
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS ongoing timestamptz;
-- Ours: who holds the ongoing marker ("host:pid"), for operators.
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS ongoing_by text;
CREATE UNIQUE INDEX IF NOT EXISTS crontabber_unique_app_name_idx ON crontabber (app_name);
-- Ours (migration 0005): heartbeat leases and fencing. run_id is the fencing
-- token of the run holding the marker (every state write of a run is
-- conditional on it); heartbeat is its holder's last renewal (database clock),
-- NULL for a marker set by a runner without heartbeats (crontabber 0.18).
CREATE SEQUENCE IF NOT EXISTS crontabber_run_id_seq;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS run_id bigint;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS heartbeat timestamptz;
-- Ours (migration 0006): a paused job is not run by cron ticks until paused_until.
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS paused_until timestamptz;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS paused_reason text;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS paused_by text;

-- crontabber 0.18's run log: one row per successful unit or failed attempt.
CREATE TABLE IF NOT EXISTS crontabber_log (
    id            SERIAL NOT NULL,
    app_name      text NOT NULL,
    log_time      timestamptz DEFAULT now() NOT NULL,
    duration      interval,
    success       timestamptz,
    exc_type      text,
    exc_value     text,
    exc_traceback text
);
-- Ours (migration 0005): which run, host and process wrote the row.
ALTER TABLE crontabber_log ADD COLUMN IF NOT EXISTS run_id bigint;
ALTER TABLE crontabber_log ADD COLUMN IF NOT EXISTS host text;
ALTER TABLE crontabber_log ADD COLUMN IF NOT EXISTS pid integer;
-- Ours (migration 0009): a job's rows newest first, one run's rows (--history, --show-error).
CREATE INDEX IF NOT EXISTS crontabber_log_app_name_id_idx ON crontabber_log (app_name, id);
CREATE INDEX IF NOT EXISTS crontabber_log_app_name_run_id_idx ON crontabber_log (app_name, run_id);

-- Ours (migration 0012): the run ledger (issue #23). A run is a row from its claim: written by the claim with
-- status 'running', its heartbeat moved by each lease renewal, its end written by the run
-- (succeeded, failed, timed out, stopped by signal, fenced off) or by whoever finds it dead
-- (abandoned). It holds the job's one-line summary and a capped, redacted tail of what the
-- job logged and printed, so on-call never needs the host that ran it.
-- crontabber_log keeps crontabber 0.18's one row per unit; its summary is ours.
CREATE TABLE IF NOT EXISTS crontabber_run (
    run_id          bigint PRIMARY KEY,
    app_name        text NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('scheduled', 'forced', 'rerun')),
    host            text NOT NULL,
    pid             integer NOT NULL,
    started         timestamptz NOT NULL,
    heartbeat       timestamptz,
    ended           timestamptz,
    status          text NOT NULL DEFAULT 'running'
                    CHECK (status IN ('running', 'succeeded', 'failed', 'timed out',
                                      'stopped by signal', 'fenced off', 'abandoned')),
    intervals       integer NOT NULL DEFAULT 0,
    first_interval  timestamptz,
    last_interval   timestamptz,
    summary         text,
    error           text,
    output          text NOT NULL DEFAULT '',
    output_dropped  bigint NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS crontabber_run_app_name_run_id_idx ON crontabber_run (app_name, run_id);
ALTER TABLE crontabber_log ADD COLUMN IF NOT EXISTS summary text;

-- Ours (migration 0006): every operator action (force, rerun, reset, release, pause,
-- resume, mark-success): who (user@host), when, what, why.
CREATE TABLE IF NOT EXISTS crontabber_audit (
    id        bigserial PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor     text NOT NULL,
    action    text NOT NULL,
    app_name  text NOT NULL,
    reason    text,
    detail    json NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS crontabber_audit_at_idx ON crontabber_audit (at);

-- Ours (migration 0006): one row per host that ticked: its last tick, version and
-- clock skew against the database clock (--nagios, the dashboard).
CREATE TABLE IF NOT EXISTS crontabber_host (
    host          text PRIMARY KEY,
    version       text NOT NULL,
    last_tick     timestamptz NOT NULL,
    skew_seconds  double precision NOT NULL,
    pid           integer
);

-- Missing-symbol counts (issue #5; migration 0003).
-- One row per distinct missing symbol; hash = md5 of the four identifying fields
-- (jobs/missing_symbols/model.py: symbol_hash). code_file/code_id are '' when unknown.
CREATE TABLE IF NOT EXISTS missing_symbol (
    hash        text COLLATE "C" PRIMARY KEY,
    debug_file  text NOT NULL,
    debug_id    text NOT NULL,
    code_file   text NOT NULL DEFAULT '',
    code_id     text NOT NULL DEFAULT '',
    count       bigint NOT NULL CHECK (count > 0),
    first_seen  timestamptz NOT NULL,
    last_seen   timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS missing_symbol_last_seen_idx ON missing_symbol (last_seen);

-- Lookups per symbol and UTC day, so any day's report can be rebuilt.
CREATE TABLE IF NOT EXISTS missing_symbol_day (
    hash   text COLLATE "C" NOT NULL,
    day    date NOT NULL,
    count  bigint NOT NULL CHECK (count > 0),
    PRIMARY KEY (hash, day)
);
CREATE INDEX IF NOT EXISTS missing_symbol_day_day_idx ON missing_symbol_day (day);

-- One row per consumed batch (an S3 key under the inbox prefix), committed in the
-- same transaction as its counts: a key with a row is never consumed again.
-- status 'quarantined': the batch was rejected as a whole (reason says why) and
-- none of its events were counted.
CREATE TABLE IF NOT EXISTS missing_symbol_batch (
    key           text COLLATE "C" PRIMARY KEY,
    events        bigint NOT NULL,
    status        text NOT NULL CHECK (status IN ('ok', 'quarantined')),
    reason        text,
    processed_at  timestamptz NOT NULL DEFAULT now()
);

-- Issue #4, the symbol-upload queue (jobs/uploads/); same DDL as migrations/0002_uploads.sql.
CREATE TABLE IF NOT EXISTS upload (
    id              bigserial PRIMARY KEY,
    inbox_key       text NOT NULL,
    filename        text NOT NULL,
    size            bigint NOT NULL,
    uploaded_by     text,
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'processing', 'done', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    claimed_by      text,
    claimed_at      timestamptz,
    error           text,
    files_total     integer,
    files_uploaded  integer,
    files_skipped   integer,
    files_ignored   integer,
    bytes_uploaded  bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz
);
CREATE INDEX IF NOT EXISTS upload_queue_idx ON upload (created_at, id)
    WHERE status IN ('pending', 'processing');

CREATE TABLE IF NOT EXISTS file_upload (
    id              bigserial PRIMARY KEY,
    upload_id       bigint NOT NULL REFERENCES upload (id) ON DELETE CASCADE,
    key             text NOT NULL,
    size            bigint NOT NULL,
    original_size   bigint NOT NULL,
    original_md5    text NOT NULL,
    compressed      boolean NOT NULL,
    "update"        boolean NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT file_upload_upload_key_unique UNIQUE (upload_id, key)
);
CREATE INDEX IF NOT EXISTS file_upload_key_idx ON file_upload (key);

-- S3 pruning (jobs/prune, issue #7): one row per run, one per rule of a run.
CREATE TABLE IF NOT EXISTS prune_run (
    id           bigserial PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at  timestamptz,
    dry_run      boolean NOT NULL,
    cap          integer NOT NULL,
    capped       boolean NOT NULL DEFAULT false,
    holder       text NOT NULL,
    error        text  -- a run that failed: its error in one line (migration 0010)
);
CREATE TABLE IF NOT EXISTS prune_rule_result (
    run_id        bigint NOT NULL REFERENCES prune_run (id) ON DELETE CASCADE,
    rule          text NOT NULL,
    keys_deleted  bigint NOT NULL DEFAULT 0,
    bytes_freed   bigint NOT NULL DEFAULT 0,
    errors        bigint NOT NULL DEFAULT 0,
    error_sample  text,
    PRIMARY KEY (run_id, rule)
);
CREATE INDEX IF NOT EXISTS upload_inbox_key_idx ON upload (inbox_key);
-- A delete_objects batch about to be sent (migration 0011): deleted with the transaction that
-- counts it; one left by a dead run is reconciled against S3 by the next run (docs/jobs/prune.md).
CREATE TABLE IF NOT EXISTS prune_intent (
    id      bigserial PRIMARY KEY,
    run_id  bigint NOT NULL,
    rule    text NOT NULL,
    bucket  text NOT NULL,
    keys    text[] NOT NULL,
    sizes   bigint[] NOT NULL,
    FOREIGN KEY (run_id, rule) REFERENCES prune_rule_result (run_id, rule) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS prune_intent_run_idx ON prune_intent (run_id);

-- The incremental search-index job's progress (issue #16; same DDL as migrations/0007).
-- Every upload finished up to indexed_to (minus the job's overlap) is in index_name.
CREATE TABLE IF NOT EXISTS search_index_watermark (
    alias       text PRIMARY KEY,
    index_name  text NOT NULL,
    indexed_to  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS upload_completed_at_idx ON upload (completed_at)
    WHERE completed_at IS NOT NULL;
