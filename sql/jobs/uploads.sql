-- Queries of jobs/uploads/store.py: the symbol-upload queue (tables upload, file_upload).

-- name: enqueue
INSERT INTO upload (inbox_key, filename, size, uploaded_by)
VALUES (%(inbox_key)s, %(filename)s, %(size)s, %(uploaded_by)s)
RETURNING id;

-- name: claim_next
-- One upload for this worker: a pending one whose retry delay has passed, or one whose
-- worker's lease ran out (the worker died). SKIP LOCKED: concurrent workers never wait for
-- each other and never take the same row; the claim is committed at once, and from then on
-- status = 'processing' plus a fresh claimed_at (the lease, renewed by heartbeats) keep
-- other workers away.
UPDATE upload SET status = 'processing', attempts = attempts + 1,
       claimed_by = %(worker)s, claimed_at = clock_timestamp(), error = NULL
WHERE id = (
    SELECT id FROM upload
    WHERE attempts < %(max_attempts)s
      AND NOT (id = ANY(%(exclude)s::bigint[]))
      AND ((status = 'pending'
            AND (claimed_at IS NULL
                 OR claimed_at < clock_timestamp() - make_interval(secs => %(retry_delay)s)))
           OR (status = 'processing'
               AND claimed_at < clock_timestamp() - make_interval(secs => %(lease)s)))
    ORDER BY created_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: claim_id
-- `reprocess ID`: take one upload whatever its status, unless a live worker holds it.
UPDATE upload SET status = 'processing', attempts = attempts + 1,
       claimed_by = %(worker)s, claimed_at = clock_timestamp(), error = NULL
WHERE id = (
    SELECT id FROM upload
    WHERE id = %(id)s
      AND (status <> 'processing'
           OR claimed_at < clock_timestamp() - make_interval(secs => %(lease)s))
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: get
SELECT * FROM upload WHERE id = %(id)s;

-- name: abandon_expired
-- Claims whose worker died on the last allowed attempt: nobody will retry them.
UPDATE upload SET status = 'failed', completed_at = clock_timestamp(),
       error = 'abandoned: the worker ' || coalesce(claimed_by, '?') || ' stopped renewing its '
               || 'claim (lease expired) on attempt ' || attempts || ' of ' || %(max_attempts)s
WHERE status = 'processing' AND attempts >= %(max_attempts)s
  AND claimed_at < clock_timestamp() - make_interval(secs => %(lease)s)
RETURNING id;

-- name: heartbeat
-- Renew the lease; no row means another worker took the upload over.
UPDATE upload SET claimed_at = clock_timestamp()
WHERE id = %(id)s AND status = 'processing' AND claimed_by = %(worker)s
RETURNING id;

-- name: written_keys
-- Keys this upload already wrote (in an earlier, interrupted attempt).
SELECT key FROM file_upload WHERE upload_id = %(id)s;

-- name: record_files
-- Rows of files written, all in one statement (psycopg2's execute_values fills VALUES).
-- Idempotent: a retried attempt that writes the same key again keeps the first row.
INSERT INTO file_upload (upload_id, key, size, original_size, original_md5, compressed, "update",
                         previous_md5, previous_size, previous_upload_id, code_id, code_file)
VALUES %s
ON CONFLICT ON CONSTRAINT file_upload_upload_key_unique DO NOTHING;

-- name: finish_done
-- Counts over file_upload, so rows written by earlier attempts count once.
UPDATE upload u SET status = 'done', completed_at = clock_timestamp(), error = NULL,
       files_total = %(files_total)s, files_ignored = %(files_ignored)s,
       files_uploaded = f.n, files_skipped = %(files_total)s - %(files_ignored)s - f.n,
       bytes_uploaded = f.bytes
FROM (SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes
      FROM file_upload WHERE upload_id = %(id)s) f
WHERE u.id = %(id)s AND u.status = 'processing' AND u.claimed_by = %(worker)s
RETURNING u.id;

-- name: finish_error
-- A failed attempt: 'failed' when the error is permanent or attempts are used up, else back
-- to 'pending' (claimed_at then dates the attempt, for the retry delay).
UPDATE upload SET status = CASE WHEN %(permanent)s OR attempts >= %(max_attempts)s
                                THEN 'failed' ELSE 'pending' END,
       completed_at = CASE WHEN %(permanent)s OR attempts >= %(max_attempts)s
                           THEN clock_timestamp() END,
       error = %(error)s, files_total = %(files_total)s, files_ignored = %(files_ignored)s
WHERE id = %(id)s AND status = 'processing' AND claimed_by = %(worker)s
RETURNING status;

-- name: find_queued
-- `demo`: an upload of this file by this uploader that is not failed (so a rerun adds nothing).
SELECT id FROM upload
WHERE filename = %(filename)s AND uploaded_by IS NOT DISTINCT FROM %(uploaded_by)s
  AND status <> 'failed'
ORDER BY id LIMIT 1;

-- name: recent
-- `list`: the newest uploads first (the primary key's order is the queue's arrival order),
-- of one status or all; `now` is the database's clock, for their ages.
SELECT id, status, inbox_key, filename, size, uploaded_by, attempts, claimed_by, claimed_at,
       error, files_total, files_uploaded, files_skipped, files_ignored, bytes_uploaded,
       created_at, completed_at, clock_timestamp() AS now
FROM upload
WHERE %(status)s::text IS NULL OR status = %(status)s
ORDER BY id DESC
LIMIT %(limit)s;

-- name: one
-- `show ID`: the upload, the files written so far and the database's clock.
SELECT u.*, (SELECT count(*) FROM file_upload f WHERE f.upload_id = u.id) AS files_written,
       clock_timestamp() AS now
FROM upload u WHERE u.id = %(id)s;

-- name: files
-- `show ID`: the objects the upload wrote, in key order, at most `limit`.
SELECT key, size, original_size, original_md5, compressed, "update", created_at, code_id,
       code_file, previous_upload_id, previous_md5, previous_size
FROM file_upload WHERE upload_id = %(id)s
ORDER BY key
LIMIT %(limit)s;

-- name: claimable
-- `drain`'s progress bar: how many uploads claim_next would hand out now (its conditions).
SELECT count(*) AS n FROM upload
WHERE attempts < %(max_attempts)s
  AND ((status = 'pending'
        AND (claimed_at IS NULL
             OR claimed_at < clock_timestamp() - make_interval(secs => %(retry_delay)s)))
       OR (status = 'processing'
           AND claimed_at < clock_timestamp() - make_interval(secs => %(lease)s)));
