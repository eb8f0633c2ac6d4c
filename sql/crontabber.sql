-- Runtime queries of the runner's state store (crontabber/store.py).
-- Each block starts with "-- name: NAME"; parameters are psycopg2 %(name)s.

-- name: clock
-- The database's clock: every host agrees on it, whatever its own clock says.
SELECT clock_timestamp() AS now;

-- name: all_states
SELECT app_name, next_run, first_run, last_run, last_success, ongoing, ongoing_by,
       error_count, depends_on, last_error
FROM crontabber;

-- name: get_state
SELECT app_name, next_run, first_run, last_run, last_success, ongoing, ongoing_by,
       error_count, depends_on, last_error
FROM crontabber
WHERE app_name = %(app_name)s;

-- name: insert_skeleton
-- The row a job's first attempt locks; a concurrent first insert waits on the
-- unique index and then does nothing, so both runners go on to lock one row.
INSERT INTO crontabber (app_name, error_count, depends_on, last_error)
VALUES (%(app_name)s, 0, %(depends_on)s, '{}')
ON CONFLICT (app_name) DO NOTHING;

-- name: lock_state
SELECT app_name, next_run, first_run, last_run, last_success, ongoing, ongoing_by,
       error_count, depends_on, last_error, clock_timestamp() AS now
FROM crontabber
WHERE app_name = %(app_name)s
FOR UPDATE NOWAIT;

-- name: mark_ongoing
UPDATE crontabber
SET ongoing = %(now)s, ongoing_by = %(holder)s, depends_on = %(depends_on)s
WHERE app_name = %(app_name)s;

-- name: record_success
-- Progress after each successful unit (each backfill interval), so a kill
-- mid-backfill never redoes finished intervals.
UPDATE crontabber SET last_success = %(success)s WHERE app_name = %(app_name)s;

-- name: log_success
INSERT INTO crontabber_log (app_name, duration, success)
VALUES (%(app_name)s, %(duration)s, %(success)s);

-- name: log_failure
INSERT INTO crontabber_log (app_name, duration, exc_type, exc_value, exc_traceback)
VALUES (%(app_name)s, %(duration)s, %(exc_type)s, %(exc_value)s, %(exc_traceback)s);

-- name: finish
-- The end of an attempt. The ongoing marker is cleared only if it is still
-- ours: another runner may have taken over a marker it judged stale.
UPDATE crontabber
SET first_run = COALESCE(first_run, %(started)s),
    last_run = %(started)s,
    next_run = %(next_run)s,
    error_count = CASE WHEN %(succeeded)s THEN 0 ELSE COALESCE(error_count, 0) + 1 END,
    last_error = %(last_error)s,
    depends_on = %(depends_on)s,
    ongoing = CASE WHEN ongoing_by IS NOT DISTINCT FROM %(holder)s THEN NULL ELSE ongoing END,
    ongoing_by = CASE WHEN ongoing_by IS NOT DISTINCT FROM %(holder)s THEN NULL ELSE ongoing_by END
WHERE app_name = %(app_name)s;

-- name: delete_state
DELETE FROM crontabber WHERE app_name = %(app_name)s RETURNING app_name;
