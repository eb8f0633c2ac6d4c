-- 0019: the `broken-entry` alert. Expand only: the release before this one writes none of it.
-- A jobs entry whose class does not load (a module that no longer imports after a deploy) no
-- longer stops the tick: the other jobs run, and the fleet is told once per entry and error.
-- (Numbered 0019, not 0017: numbers 0017 and 0018 are left to changes made alongside.)
ALTER TABLE crontabber_alert DROP CONSTRAINT IF EXISTS crontabber_alert_kind_check;
ALTER TABLE crontabber_alert ADD CONSTRAINT crontabber_alert_kind_check
    CHECK (kind IN ('failing', 'recovered', 'silent', 'late', 'takeover', 'test', 'old-code',
                    'broken-entry'));
