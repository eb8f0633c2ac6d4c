-- 0014: maintenance windows of the alerts, and the missed deadline (late) as a kind of alert
-- (issue #25).
-- A maintenance window: alerts of one job (scope = its app_name), or of every job (scope
-- '*'), are muted until `until` (no alert opens, ends or repeats), with who and why, as a
-- pause has. The jobs still run.
CREATE TABLE IF NOT EXISTS crontabber_mute (
    scope    text PRIMARY KEY,
    until    timestamptz NOT NULL,
    muted_by text NOT NULL,
    reason   text NOT NULL,
    at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
ALTER TABLE crontabber_alert DROP CONSTRAINT IF EXISTS crontabber_alert_kind_check;
ALTER TABLE crontabber_alert ADD CONSTRAINT crontabber_alert_kind_check
    CHECK (kind IN ('failing', 'recovered', 'silent', 'late', 'takeover', 'test'));
DROP INDEX IF EXISTS crontabber_alert_open_idx;
CREATE INDEX IF NOT EXISTS crontabber_alert_open_idx ON crontabber_alert (id)
    WHERE resolved_at IS NULL AND kind IN ('failing', 'silent', 'late');
