-- 0024: per-run metrics and checks (issue #34 item 3). A job may return named numbers with its
-- summary (keys deleted, bytes freed...): the run keeps them (the last unit's, as its summary),
-- and the checks over them and over the run's duration open a `breach` alert. Expand only:
-- the release before this one writes no metrics and opens no breach. The list keeps every
-- kind before it, 'no-host' (0021) included.
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS metrics jsonb;
ALTER TABLE crontabber_alert DROP CONSTRAINT IF EXISTS crontabber_alert_kind_check;
ALTER TABLE crontabber_alert ADD CONSTRAINT crontabber_alert_kind_check
    CHECK (kind IN ('failing', 'recovered', 'superseded', 'silent', 'late', 'takeover', 'test',
                    'old-code', 'broken-entry', 'no-host', 'breach'));
