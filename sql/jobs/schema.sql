-- The symbol server's jobs' whole current schema (jobs/), applied idempotently on first use
-- by a runner whose configured jobs declare it (BaseCronApp.schema_dir) and by the jobs'
-- commands; the runner's own tables are in sql/crontabber/schema.sql. Same rules: every
-- statement safe to run again; changes come as numbered files in migrations/ beside this
-- file, numbered in one sequence with the runner's (sql/README.md).

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
    code_id         text,    -- a .sym file's INFO CODE_ID record (migration 0018)
    code_file       text,
    previous_md5    text,    -- "update": the object it replaced (original MD5, size, upload)
    previous_size   bigint,
    previous_upload_id bigint,
    CONSTRAINT file_upload_upload_key_unique UNIQUE (upload_id, key)
);
CREATE INDEX IF NOT EXISTS file_upload_key_idx ON file_upload (key);
CREATE INDEX IF NOT EXISTS file_upload_replaced_idx ON file_upload (created_at) WHERE "update";

-- S3 pruning (jobs/prune, issue #7): one row per run, one per rule of a run.
CREATE TABLE IF NOT EXISTS prune_run (
    id           bigserial PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at  timestamptz,
    dry_run      boolean NOT NULL,
    cap          integer NOT NULL,
    capped       boolean NOT NULL DEFAULT false,
    holder       text NOT NULL,
    error        text, -- a run that failed: its error in one line (migration 0010)
    lease_until  timestamptz  -- a live run renews it; passed and unfinished: dead (0015)
);
CREATE TABLE IF NOT EXISTS prune_rule_result (
    run_id        bigint NOT NULL REFERENCES prune_run (id) ON DELETE CASCADE,
    rule          text NOT NULL,
    keys_deleted  bigint NOT NULL DEFAULT 0,
    bytes_freed   bigint NOT NULL DEFAULT 0,
    errors        bigint NOT NULL DEFAULT 0,
    error_sample  text,
    inventory     text, -- the inventory report the rule read (source=inventory; 0023)
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

-- The runner's roles get their rights on these tables too (crontabber_grant_rights, the
-- runner's migration 0025; a database that gets this file before that migration gets them
-- from the migration).
DO $$
BEGIN
    IF to_regprocedure('crontabber_grant_rights()') IS NOT NULL THEN
        PERFORM crontabber_grant_rights();
    END IF;
END $$;
