-- 0019: the `broken-entry` alert. Expand only: the release before this one writes none of it.
-- A jobs entry whose class does not load (a module that no longer imports after a deploy) no
-- longer stops the tick: the other jobs run, and the fleet is told once per entry and error.
-- The list keeps 0017's 'superseded'.
ALTER TABLE crontabber_alert DROP CONSTRAINT IF EXISTS crontabber_alert_kind_check;
ALTER TABLE crontabber_alert ADD CONSTRAINT crontabber_alert_kind_check
    CHECK (kind IN ('failing', 'recovered', 'superseded', 'silent', 'late', 'takeover', 'test',
                    'old-code', 'broken-entry'));
