-- Queries of jobs/runlog.py: retention of crontabber_log, which crontabber never trims.

-- name: delete_batch
-- One batch of old rows; the job repeats it until a batch comes back short. Through the
-- runner's schema's function (migration 0030: the runner login may not DELETE there; a
-- keep_days under 7 is refused).
SELECT crontabber_prune_log(%(keep_days)s, %(batch_size)s) AS deleted;

-- name: delete_run_batch
-- The same for the run ledger (crontabber_run): runs that ended before the cut-off; a run
-- still marked running is kept whatever its age (whoever finds it dead records its end).
SELECT crontabber_prune_runs(%(keep_days)s, %(batch_size)s) AS deleted;

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
