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
