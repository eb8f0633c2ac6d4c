-- 0009: indexes for --history, --show-error and the metrics file (issue #13): a job's
-- log rows newest first, and one run's rows. Measured on 500k rows (71k for the job):
-- the last failure 45 ms -> 0.3 ms, one run's rows 43 ms -> 0.25 ms.
CREATE INDEX IF NOT EXISTS crontabber_log_app_name_id_idx ON crontabber_log (app_name, id);
CREATE INDEX IF NOT EXISTS crontabber_log_app_name_run_id_idx ON crontabber_log (app_name, run_id);
