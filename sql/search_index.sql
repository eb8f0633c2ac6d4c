-- Queries of the search-index rebuild (jobs/search_index.py, issue #6).
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
