-- 0016: rolling deploys. Expand only: the release before this one reads and writes as before.
-- A host whose code is older than the database's schema (a newer release migrated it) claims
-- no job; each tick records the migrations its code lacks (schema_behind, empty when none),
-- which --nagios, the dashboard's fleet view and an `old-code` alert show by host.
-- (schema_migrations.schema, which says whose a migration is, is added by crontabber/schema.py
-- itself before it records one: crontabber/sql/schema_migrations.sql.)
ALTER TABLE crontabber_host ADD COLUMN IF NOT EXISTS schema_behind integer[];
ALTER TABLE crontabber_alert DROP CONSTRAINT IF EXISTS crontabber_alert_kind_check;
ALTER TABLE crontabber_alert ADD CONSTRAINT crontabber_alert_kind_check
    CHECK (kind IN ('failing', 'recovered', 'silent', 'late', 'takeover', 'test', 'old-code'));
