-- The schedule each job's next_run was computed under (issue #40), kept in the audit trail:
-- an action 'schedule' row per change, detail.schedule the schedule as written with its zone
-- (absent: crontabber's form in UTC, what every row before cron expressions and zones was
-- computed under). Run by crontabber/schedule_store.py.

-- name: recorded_schedules
SELECT DISTINCT ON (app_name) app_name, detail->>'schedule' AS schedule
FROM crontabber_audit
WHERE action = 'schedule'
ORDER BY app_name, id DESC;

-- name: schedule_lock
-- One host at a time records a job's schedule change (until the transaction ends).
SELECT pg_advisory_xact_lock(hashtext('crontabber schedule ' || %(app_name)s));

-- name: recorded_schedule
SELECT detail->>'schedule' AS schedule
FROM crontabber_audit
WHERE action = 'schedule' AND app_name = %(app_name)s
ORDER BY id DESC
LIMIT 1;

-- name: schedule_state
SELECT app_name, next_run, first_run, last_run, last_success, ongoing, error_count, depends_on, last_error
FROM crontabber
WHERE app_name = %(app_name)s;

-- name: reschedule
-- Only if no run took the job and nobody moved next_run since it was read
-- (crontabber_reschedule, migration 0031); no row: nothing written.
SELECT %(app_name)s AS app_name WHERE crontabber_reschedule(%(app_name)s, %(next_run)s, %(was)s);
