-- Queries of jobs/runlog.py: retention of crontabber_log, which crontabber never trims.

-- name: delete_batch
-- One batch of old rows; the job repeats it until a batch comes back short.
DELETE FROM crontabber_log
WHERE ctid IN (
    SELECT ctid FROM crontabber_log
    WHERE log_time < clock_timestamp() - make_interval(days => %(keep_days)s)
    LIMIT %(batch_size)s
);
