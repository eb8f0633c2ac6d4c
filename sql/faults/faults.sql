-- Queries of faults/harness.py (query): the fault suite's seeding and its independent checks
-- (each reads the tables as they are, never through the code under test).

-- name: uploads
-- The uploads the suite queued, with what a checker needs.
SELECT id, inbox_key, filename, status, error, attempts, files_total, files_uploaded
FROM upload WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id;

-- name: file_uploads
SELECT upload_id, key, size, compressed FROM file_upload
WHERE upload_id = ANY(%(ids)s::bigint[]) ORDER BY upload_id, key;

-- name: missing_totals
-- Lookups per symbol of the suite's symbols (debug_file starts with the prefix).
SELECT debug_file, debug_id, code_file, code_id, count FROM missing_symbol
WHERE debug_file LIKE %(like)s;

-- name: missing_day_totals
SELECT s.debug_file, s.debug_id, s.code_file, s.code_id, d.day, d.count
FROM missing_symbol_day d JOIN missing_symbol s ON s.hash = d.hash
WHERE s.debug_file LIKE %(like)s;

-- name: batch_rows
SELECT key, events, status FROM missing_symbol_batch WHERE key LIKE %(like)s;

-- name: day_rows
-- Every symbol missed on a day with that day's count (the report's source rows).
SELECT s.debug_file, s.debug_id, s.code_file, s.code_id, d.count
FROM missing_symbol_day d JOIN missing_symbol s ON s.hash = d.hash
WHERE d.day = %(day)s;

-- name: prune_audit
-- What prune's runs since a run id recorded as deleted, per rule.
SELECT coalesce(sum(x.keys_deleted), 0) AS keys, coalesce(sum(x.bytes_freed), 0) AS bytes
FROM prune_run r JOIN prune_rule_result x ON x.run_id = r.id
WHERE r.id > %(after)s AND NOT r.dry_run;

-- name: last_prune_run
SELECT coalesce(max(id), 0) AS id FROM prune_run;

-- name: prune_unsettled
-- Batches of prune's runs since a run id not yet counted (a killed run's, until a later run
-- reconciles them once its lease has passed).
SELECT count(*) FROM prune_intent WHERE run_id > %(after)s;

-- name: seed_log
-- Run-log rows of a fake app: `old` older than `days`, `recent` from today.
INSERT INTO crontabber_log (app_name, log_time, success)
SELECT %(app)s,
       clock_timestamp() - make_interval(days => %(days)s + 1) - g * interval '1 second',
       now()
FROM generate_series(1, %(old)s) AS g
UNION ALL
SELECT %(app)s, clock_timestamp() - g * interval '1 second', now()
FROM generate_series(1, %(recent)s) AS g;

-- name: log_counts
-- The fake app's rows older and younger than `days`.
SELECT count(*) FILTER (
           WHERE log_time < clock_timestamp() - make_interval(days => %(days)s)) AS old,
       count(*) FILTER (
           WHERE log_time >= clock_timestamp() - make_interval(days => %(days)s)) AS recent
FROM crontabber_log WHERE app_name = %(app)s;

-- name: job_row
SELECT app_name, ongoing, ongoing_by, run_id, last_success, error_count FROM crontabber
WHERE app_name = %(app)s;
