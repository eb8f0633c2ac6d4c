-- Queries of jobs/prune/store.py.

-- A run holds a lease on its row (lease_until) while it lives: renewed by its heartbeat and by
-- each batch's intent, never after it has passed. Only statements, no session state, so a
-- run works through a transaction pooler. A run started by the release before 0015 has no
-- lease (NULL) and is judged by its session's advisory lock, as that release did.

-- name: start_lock
-- Runs start one at a time (the check for a live run and the insert in one transaction).
SELECT pg_advisory_xact_lock(hashtext('prune_run start'));

-- name: live_runs
-- Unfinished runs still holding their lease (or, started by the release before 0015, their
-- session's advisory lock): a run may have batches in flight, whose keys a second run would
-- list, delete and count too.
SELECT r.id, r.started_at, r.holder FROM prune_run r
WHERE r.finished_at IS NULL AND COALESCE(r.lease_until > clock_timestamp(), EXISTS (
    SELECT 1 FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
      AND l.classid = hashtext('prune_run')::oid AND l.objid = r.id::int::oid))
ORDER BY r.id;

-- name: start_run
INSERT INTO prune_run (dry_run, cap, holder, lease_until)
VALUES (%(dry_run)s, %(cap)s, %(holder)s, clock_timestamp() + make_interval(secs => %(lease)s))
RETURNING id;

-- name: renew
-- The run's lease, moved on if it still holds it (a row: it does).
UPDATE prune_run SET lease_until = clock_timestamp() + make_interval(secs => %(lease)s)
WHERE id = %(run_id)s AND finished_at IS NULL AND lease_until > clock_timestamp()
RETURNING lease_until;

-- name: run_over
-- True: the run ended, or its lease passed (it can never be renewed again), or, started by
-- the release before 0015, its session's advisory lock is gone. Nothing of it is in flight.
SELECT r.finished_at IS NOT NULL
       OR COALESCE(r.lease_until <= clock_timestamp(), NOT EXISTS (
           SELECT 1 FROM pg_locks l
           WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
             AND l.classid = hashtext('prune_run')::oid AND l.objid = r.id::int::oid))
FROM prune_run r WHERE r.id = %(run_id)s;

-- name: intend
-- A batch about to be sent to delete_objects: its keys and sizes, in one row. Written in the
-- transaction that first renewed the run's lease (renew): a batch is sent with a whole lease
-- ahead of it before any other run may take the run for dead.
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

-- name: rule_inventory
-- The inventory report (its manifest's s3:// address) a rule deletes by.
UPDATE prune_rule_result SET inventory = %(inventory)s
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
-- running: unfinished and its lease not passed (an unfinished run whose lease passed is dead:
-- killed); a run of the release before 0015: its session still holds its advisory lock, which
-- shows in pg_locks as (classid, objid) = (key1, key2) with objsubid 2.
SELECT r.id, r.started_at, r.finished_at, r.dry_run, r.cap, r.capped, r.holder, r.error,
       x.rule, x.keys_deleted, x.bytes_freed, x.errors, x.error_sample, x.inventory,
       r.finished_at IS NULL AND COALESCE(r.lease_until > clock_timestamp(), EXISTS (
           SELECT 1 FROM pg_locks l
           WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
             AND l.classid = hashtext('prune_run')::oid AND l.objid = r.id::int::oid)
       ) AS running
FROM prune_run r LEFT JOIN prune_rule_result x ON x.run_id = r.id
WHERE r.id IN (SELECT id FROM prune_run ORDER BY id DESC LIMIT %(limit)s)
ORDER BY r.id DESC, x.rule;
