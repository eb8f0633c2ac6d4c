-- Queries of jobs/runlog.py: retention of crontabber_log, which crontabber never trims.

-- name: delete_batch
-- One batch of old rows; the job repeats it until a batch comes back short.
DELETE FROM crontabber_log
WHERE ctid IN (
    SELECT ctid FROM crontabber_log
    WHERE log_time < clock_timestamp() - make_interval(days => %(keep_days)s)
    LIMIT %(batch_size)s
);

-- name: delete_run_batch
-- The same for the run ledger (crontabber_run): runs that ended before the cut-off; a run
-- still marked running is kept whatever its age (whoever finds it dead records its end).
DELETE FROM crontabber_run
WHERE run_id IN (
    SELECT run_id FROM crontabber_run
    WHERE ended < clock_timestamp() - make_interval(days => %(keep_days)s)
    LIMIT %(batch_size)s
);

-- name: delete_alert_batch
-- The same for alerts: events and ended alerts opened before the cut-off, with their notices
-- (ON DELETE CASCADE); an open failing or silent alert is kept whatever its age.
DELETE FROM crontabber_alert
WHERE id IN (
    SELECT id FROM crontabber_alert
    WHERE opened_at < clock_timestamp() - make_interval(days => %(keep_days)s)
      AND (resolved_at IS NOT NULL OR kind NOT IN ('failing', 'silent', 'late'))
    LIMIT %(batch_size)s
);
