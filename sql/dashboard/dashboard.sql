-- Queries of dashboard/store.py: the pipeline panels of the operator dashboard
-- (read-only: the dashboard's session is READ ONLY). Each reads what a job's own
-- store writes: upload (jobs/uploads), missing_symbol* (jobs/missing_symbols),
-- search_index_watermark (jobs/search_index), prune_run / prune_rule_result (jobs/prune).

-- name: clock
SELECT clock_timestamp() AS now;

-- name: upload_queue
-- The queue: pending (waiting, or back for a retry) and processing uploads. The
-- partial index upload_queue_idx holds exactly these rows.
SELECT count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'processing') AS processing,
       min(created_at) FILTER (WHERE status = 'pending') AS oldest_pending
FROM upload
WHERE status IN ('pending', 'processing');

-- name: failed_uploads
-- Uploads that failed for good since %(since)s, newest first (a failed upload's
-- completed_at is when it was given up: upload_completed_at_idx).
SELECT id, filename, uploaded_by, attempts, error, completed_at,
       count(*) OVER () AS total
FROM upload
WHERE status = 'failed' AND completed_at > %(since)s
ORDER BY completed_at DESC, id DESC
LIMIT %(limit)s;

-- name: replaced_files
-- Symbol files written over another file's bytes since %(since)s, newest first, with what
-- they replaced (migration 0018; the partial index file_upload_replaced_idx).
SELECT key, upload_id, created_at, previous_upload_id, previous_md5, previous_size,
       count(*) OVER () AS total
FROM file_upload
WHERE "update" AND created_at > %(since)s
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s;

-- name: quarantined_batches
-- Missing-symbol batches rejected as a whole, newest first, with how many there are.
SELECT key, events, reason, processed_at, count(*) OVER () AS total
FROM missing_symbol_batch
WHERE status = 'quarantined'
ORDER BY processed_at DESC, key
LIMIT %(limit)s;

-- name: most_missed
-- The symbols looked up most on day %(day)s (UTC), most first.
SELECT s.debug_file, s.debug_id, s.code_file, s.code_id, d.count
FROM missing_symbol_day d JOIN missing_symbol s ON s.hash = d.hash
WHERE d.day = %(day)s
ORDER BY d.count DESC, s.debug_file, s.debug_id
LIMIT %(limit)s;

-- name: watermark
-- The incremental indexer's progress on the alias (absent before its first run).
SELECT index_name, indexed_to, updated_at FROM search_index_watermark WHERE alias = %(alias)s;

-- name: last_prune
-- The newest prune run and its rules (a run without rules yet: one row, rule NULL).
SELECT r.id, r.started_at, r.finished_at, r.dry_run, r.cap, r.capped, r.holder,
       x.rule, x.keys_deleted, x.bytes_freed, x.errors, x.error_sample
FROM prune_run r LEFT JOIN prune_rule_result x ON x.run_id = r.id
WHERE r.id = (SELECT max(id) FROM prune_run)
ORDER BY x.rule;
