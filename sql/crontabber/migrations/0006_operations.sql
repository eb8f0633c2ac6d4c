-- 0006: on-call operations (issue #13). Additive only.
-- A paused job is not run by cron ticks until paused_until (or --resume).
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS paused_until timestamptz;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS paused_reason text;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS paused_by text;
-- Every operator action (force, rerun, reset, release, pause, resume, mark-success): who, when,
-- what, why.
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
-- The fleet: one row per host that ticked (its last tick, version, and its clock's
-- skew against the database clock), for --nagios and the dashboard.
CREATE TABLE IF NOT EXISTS crontabber_host (
    host          text PRIMARY KEY,
    version       text NOT NULL,
    last_tick     timestamptz NOT NULL,
    skew_seconds  double precision NOT NULL,
    pid           integer
);
