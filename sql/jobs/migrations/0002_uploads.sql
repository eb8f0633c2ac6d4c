-- 0002: the symbol-upload queue (issue #4): table upload (one row per archive in the inbox)
-- and file_upload (one row per symbol object written).
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
