-- 0017: alerts that never mislead (issue #32). Expand only: the release before this one reads
-- and writes as before.
-- A success declared by an operator (--mark-success) is recorded as such: when, by whom and
-- why. It is the job's last success only while last_success still equals success_marked_at
-- (a real success moves last_success; code one release back, which does not clear these
-- columns, therefore cannot make a real success look marked).
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS success_marked_at timestamptz;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS success_marked_by text;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS success_marked_reason text;
-- A failure streak that ends by a success and is followed by a new streak before the next
-- evaluation is 'superseded' by the new streak's alert (never a "recovered" after it).
ALTER TABLE crontabber_alert DROP CONSTRAINT IF EXISTS crontabber_alert_kind_check;
ALTER TABLE crontabber_alert ADD CONSTRAINT crontabber_alert_kind_check
    CHECK (kind IN ('failing', 'recovered', 'superseded', 'silent', 'late', 'takeover', 'test',
                    'old-code'));
