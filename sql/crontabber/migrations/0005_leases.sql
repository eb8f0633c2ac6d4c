-- 0005: heartbeat leases and fencing (issue #12). Additive only: crontabber
-- 0.18's columns keep their meaning, and a 0.18 runner sharing the table
-- ignores these.
CREATE SEQUENCE IF NOT EXISTS crontabber_run_id_seq;
-- The run holding the ongoing marker: every state write of a run is
-- conditional on it (a fencing token), so a run that lost its lease cannot
-- overwrite a newer run's state.
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS run_id bigint;
-- The holder's last heartbeat (database clock); NULL for a marker set by a
-- runner without heartbeats (crontabber 0.18).
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS heartbeat timestamptz;
-- Who wrote each log row.
ALTER TABLE crontabber_log ADD COLUMN IF NOT EXISTS run_id bigint;
ALTER TABLE crontabber_log ADD COLUMN IF NOT EXISTS host text;
ALTER TABLE crontabber_log ADD COLUMN IF NOT EXISTS pid integer;
