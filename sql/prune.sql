-- Queries of jobs/prune/store.py.

-- name: start_run
INSERT INTO prune_run (dry_run, cap, holder) VALUES (%(dry_run)s, %(cap)s, %(holder)s)
RETURNING id, started_at;

-- name: add_rule
INSERT INTO prune_rule_result (run_id, rule) VALUES (%(run_id)s, %(rule)s)
ON CONFLICT DO NOTHING;

-- name: add_progress
UPDATE prune_rule_result
SET keys_deleted = keys_deleted + %(keys)s,
    bytes_freed = bytes_freed + %(bytes)s,
    errors = errors + %(errors)s,
    error_sample = COALESCE(%(error_sample)s, error_sample)
WHERE run_id = %(run_id)s AND rule = %(rule)s;

-- name: finish_run
UPDATE prune_run SET finished_at = clock_timestamp(), capped = %(capped)s WHERE id = %(run_id)s;

-- name: fail_run
-- The run met an error: it ended then, with that error (one line).
UPDATE prune_run SET finished_at = clock_timestamp(), error = %(error)s WHERE id = %(run_id)s;

-- name: finished_uploads
-- Of the listed inbox keys, those of uploads that are done or failed and finished
-- before the cutoff. Keys of pending or processing uploads never come back.
SELECT inbox_key FROM upload
WHERE inbox_key = ANY(%(keys)s)
  AND status IN ('done', 'failed')
  AND COALESCE(completed_at, created_at) < %(cutoff)s
EXCEPT
SELECT inbox_key FROM upload
WHERE inbox_key = ANY(%(keys)s) AND status IN ('pending', 'processing');

-- name: consumed_batches
-- Of the listed batch keys, those consumed (status ok) before the cutoff.
-- Quarantined batches are kept for inspection.
SELECT key FROM missing_symbol_batch
WHERE key = ANY(%(keys)s) AND status = 'ok' AND processed_at < %(cutoff)s;

-- name: history
SELECT r.id, r.started_at, r.finished_at, r.dry_run, r.cap, r.capped, r.holder, r.error,
       x.rule, x.keys_deleted, x.bytes_freed, x.errors, x.error_sample
FROM prune_run r LEFT JOIN prune_rule_result x ON x.run_id = r.id
WHERE r.id IN (SELECT id FROM prune_run ORDER BY id DESC LIMIT %(limit)s)
ORDER BY r.id DESC, x.rule;
