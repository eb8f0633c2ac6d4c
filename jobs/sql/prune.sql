-- Queries of jobs/prune/store.py.

-- name: start_run
-- The run's session holds an advisory lock on its id until the run ends (or the session does,
-- when the process dies): a run whose lock can be taken is not deleting anything any more.
WITH run AS (
    INSERT INTO prune_run (dry_run, cap, holder) VALUES (%(dry_run)s, %(cap)s, %(holder)s)
    RETURNING id, started_at)
SELECT id, started_at, pg_advisory_lock(hashtext('prune_run'), id::int) FROM run;

-- name: release_run
SELECT pg_advisory_unlock(hashtext('prune_run'), %(run_id)s::int);

-- name: claim_dead_run
-- True: the run's session is gone (or is this one), so nothing of it is in flight; the lock
-- also keeps two runs from reconciling it at once. Released by release_run.
SELECT pg_try_advisory_lock(hashtext('prune_run'), %(run_id)s::int);

-- name: intend
-- A batch about to be sent to delete_objects: its keys and sizes, in one row.
INSERT INTO prune_intent (run_id, rule, bucket, keys, sizes)
VALUES (%(run_id)s, %(rule)s, %(bucket)s, %(keys)s::text[], %(sizes)s::bigint[])
RETURNING id;

-- name: settle
-- Batches S3 answered: their intents go, their counts are added, in one statement.
WITH settled AS (DELETE FROM prune_intent WHERE id = ANY(%(intents)s::bigint[]))
UPDATE prune_rule_result
SET keys_deleted = keys_deleted + %(keys)s,
    bytes_freed = bytes_freed + %(bytes)s,
    errors = errors + %(errors)s,
    error_sample = COALESCE(%(error_sample)s, error_sample)
WHERE run_id = %(run_id)s AND rule = %(rule)s;

-- name: unsettled_runs
-- Runs other than this one with batches sent (or about to be) but never counted.
SELECT DISTINCT run_id FROM prune_intent WHERE run_id <> %(run_id)s ORDER BY run_id;

-- name: intents
SELECT id, rule, bucket, keys, sizes FROM prune_intent WHERE run_id = %(run_id)s ORDER BY id;

-- name: reconcile_intent
-- A dead run's batch, checked against S3: the keys gone are counted for that run, the
-- intent goes (the keys still present were never deleted).
WITH settled AS (DELETE FROM prune_intent WHERE id = %(id)s RETURNING run_id, rule)
UPDATE prune_rule_result x
SET keys_deleted = keys_deleted + %(keys)s, bytes_freed = bytes_freed + %(bytes)s
FROM settled WHERE x.run_id = settled.run_id AND x.rule = settled.rule;

-- name: add_rule
INSERT INTO prune_rule_result (run_id, rule) VALUES (%(run_id)s, %(rule)s)
ON CONFLICT DO NOTHING;

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
-- running: the run's session still holds its advisory lock (see start_run): an unfinished
-- run without it is dead (killed). A two-key advisory lock shows in pg_locks as
-- (classid, objid) = (key1, key2) with objsubid 2.
SELECT r.id, r.started_at, r.finished_at, r.dry_run, r.cap, r.capped, r.holder, r.error,
       x.rule, x.keys_deleted, x.bytes_freed, x.errors, x.error_sample,
       r.finished_at IS NULL AND EXISTS (
           SELECT 1 FROM pg_locks l
           WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
             AND l.classid = hashtext('prune_run')::oid AND l.objid = r.id::int::oid
       ) AS running
FROM prune_run r LEFT JOIN prune_rule_result x ON x.run_id = r.id
WHERE r.id IN (SELECT id FROM prune_run ORDER BY id DESC LIMIT %(limit)s)
ORDER BY r.id DESC, x.rule;
