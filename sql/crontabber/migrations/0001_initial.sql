-- 0001: crontabber 0.18's state tables plus ongoing_by.
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
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS ongoing timestamptz;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS ongoing_by text;
CREATE UNIQUE INDEX IF NOT EXISTS crontabber_unique_app_name_idx ON crontabber (app_name);

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
