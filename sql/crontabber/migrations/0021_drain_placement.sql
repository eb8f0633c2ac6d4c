-- 0021: drain and placement (issue #34 item 1). Expand only: the release before this one
-- reads and writes crontabber_host's old columns as before (its tick leaves these alone, and
-- claims as it did: a host drained while it still runs that release is drained once upgraded).
-- A host drained by an operator (--drain HOST --reason ... [--until TIME]) claims nothing new;
-- its running runs finish. Each tick records the host's tags (crontabber.host_tags), which a
-- job's `hosts` option asks for; the `no-host` alert tells of a job no live host may run.
ALTER TABLE crontabber_host ADD COLUMN IF NOT EXISTS tags text[];
ALTER TABLE crontabber_host ADD COLUMN IF NOT EXISTS drained_at timestamptz;
ALTER TABLE crontabber_host ADD COLUMN IF NOT EXISTS drain_until timestamptz;
ALTER TABLE crontabber_host ADD COLUMN IF NOT EXISTS drained_by text;
ALTER TABLE crontabber_host ADD COLUMN IF NOT EXISTS drain_reason text;
ALTER TABLE crontabber_alert DROP CONSTRAINT IF EXISTS crontabber_alert_kind_check;
ALTER TABLE crontabber_alert ADD CONSTRAINT crontabber_alert_kind_check
    CHECK (kind IN ('failing', 'recovered', 'superseded', 'silent', 'late', 'takeover', 'test',
                    'old-code', 'broken-entry', 'no-host'));
-- A tick's sweep reads the open no-host alerts with the other lasting kinds: an index of all
-- four (the release before this one reads three, with crontabber_alert_open_idx, kept).
CREATE INDEX IF NOT EXISTS crontabber_alert_open_lasting_idx ON crontabber_alert (id)
    WHERE resolved_at IS NULL AND kind IN ('failing', 'silent', 'late', 'no-host');
