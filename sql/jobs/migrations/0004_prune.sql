-- 0004: S3 pruning (issue #7): one row per run, one per rule of a run.
CREATE TABLE IF NOT EXISTS prune_run (
    id           bigserial PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at  timestamptz,
    dry_run      boolean NOT NULL,
    cap          integer NOT NULL,
    capped       boolean NOT NULL DEFAULT false,
    holder       text NOT NULL
);

-- Updated after every delete_objects batch, so a run killed midway still shows its progress.
CREATE TABLE IF NOT EXISTS prune_rule_result (
    run_id        bigint NOT NULL REFERENCES prune_run (id) ON DELETE CASCADE,
    rule          text NOT NULL,
    keys_deleted  bigint NOT NULL DEFAULT 0,
    bytes_freed   bigint NOT NULL DEFAULT 0,
    errors        bigint NOT NULL DEFAULT 0,
    error_sample  text,
    PRIMARY KEY (run_id, rule)
);

-- Prune asks "which of these listed keys belong to finished uploads?" a page at a time.
CREATE INDEX IF NOT EXISTS upload_inbox_key_idx ON upload (inbox_key);
