-- Queries of the search-index jobs (jobs/search_index.py): the hourly rebuild
-- (issue #6) and the incremental index of new uploads (issue #16).
--
-- Source contract (the upload job's and the missing-symbol job's tables):
--   file_upload(key, size, created_at), key = 'v1/<debug_file>/<DEBUG_ID>/<file>'
--   missing_symbol(debug_file, debug_id, code_file, code_id, count); code_file and
--   code_id may be '' when unknown (read as NULL)
-- One row per distinct symbol file (debug_file, debug_id, file name): the size
-- of its latest upload, its latest upload time, and, where the missing-symbol
-- table knows it, the code file/id and the number of missing lookups.
-- symbol_files and count_symbol_files must describe the same rows: the rebuild
-- checks that Elasticsearch ends with exactly count_symbol_files documents.

-- name: snapshot
-- Both queries below read one snapshot, so the count matches the rows streamed.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY

-- name: source_as_of
-- The snapshot's time, recorded in the new index (its _meta): an upload whose
-- commit the snapshot missed finished after this, less the commit's delay.
SELECT now()

-- name: count_symbol_files
SELECT count(*) FROM (
    SELECT 1
    FROM file_upload
    WHERE key LIKE 'v1/%/%/%' AND split_part(key, '/', 5) = ''
    GROUP BY split_part(key, '/', 2), upper(split_part(key, '/', 3)), split_part(key, '/', 4)
) AS symbol_files

-- name: symbol_files
WITH uploaded AS (
    SELECT split_part(key, '/', 2) AS debug_file,
           upper(split_part(key, '/', 3)) AS debug_id,
           split_part(key, '/', 4) AS filename,
           (array_agg(size ORDER BY created_at DESC))[1] AS size,
           max(created_at) AS last_uploaded
    FROM file_upload
    WHERE key LIKE 'v1/%/%/%' AND split_part(key, '/', 5) = ''
    GROUP BY 1, 2, 3
), missing AS (
    SELECT debug_file,
           upper(debug_id) AS debug_id,
           NULLIF(max(code_file), '') AS code_file,
           NULLIF(max(code_id), '') AS code_id,
           sum(count)::bigint AS missing_count
    FROM missing_symbol
    GROUP BY 1, 2
)
-- last_uploaded as ISO 8601 text: parsing a million timestamps in Python to
-- format them again for JSON cost more than the rest of the row.
SELECT u.debug_file, u.debug_id, u.filename, m.code_file, m.code_id, u.size,
       to_char(u.last_uploaded AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
       m.missing_count
FROM uploaded AS u
LEFT JOIN missing AS m ON m.debug_file = u.debug_file AND m.debug_id = u.debug_id


-- The incremental job. Its source contract adds upload(id, completed_at) and
-- file_upload(upload_id): the files of uploads finished (done or failed: both
-- may have published files, and the rebuild indexes every file_upload row)
-- after %(since)s. Each touched symbol file's document is computed as
-- symbol_files computes it, from every row with the same key, so an update
-- writes what the next rebuild would.

-- name: window
-- Both queries below read one snapshot; now() is no later than it.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY

-- name: new_symbol_files
WITH touched AS (
    SELECT DISTINCT f.key
    FROM upload AS up
    JOIN file_upload AS f ON f.upload_id = up.id
    WHERE up.completed_at > %(since)s
      AND f.key LIKE 'v1/%%/%%/%%' AND split_part(f.key, '/', 5) = ''
), uploaded AS (
    SELECT split_part(key, '/', 2) AS debug_file,
           upper(split_part(key, '/', 3)) AS debug_id,
           split_part(key, '/', 4) AS filename,
           (array_agg(size ORDER BY created_at DESC))[1] AS size,
           max(created_at) AS last_uploaded
    FROM file_upload
    WHERE key IN (SELECT key FROM touched)
    GROUP BY 1, 2, 3
), missing AS (
    SELECT debug_file,
           upper(debug_id) AS debug_id,
           NULLIF(max(code_file), '') AS code_file,
           NULLIF(max(code_id), '') AS code_id,
           sum(count)::bigint AS missing_count
    FROM missing_symbol
    WHERE (debug_file, upper(debug_id)) IN (SELECT debug_file, debug_id FROM uploaded)
    GROUP BY 1, 2
)
SELECT u.debug_file, u.debug_id, u.filename, m.code_file, m.code_id, u.size,
       to_char(u.last_uploaded AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
       m.missing_count
FROM uploaded AS u
LEFT JOIN missing AS m ON m.debug_file = u.debug_file AND m.debug_id = u.debug_id

-- name: read_watermark
SELECT index_name, indexed_to FROM search_index_watermark WHERE alias = %(alias)s

-- name: save_watermark
INSERT INTO search_index_watermark (alias, index_name, indexed_to)
VALUES (%(alias)s, %(index_name)s, %(indexed_to)s)
ON CONFLICT (alias) DO UPDATE
SET index_name = EXCLUDED.index_name, indexed_to = EXCLUDED.indexed_to, updated_at = now()
