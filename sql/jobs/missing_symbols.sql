-- Queries of jobs/missing_symbols/store.py (issue #5): missing-symbol counts.

-- name: processed_keys
-- Which of these batch keys have already been consumed (counted or quarantined).
SELECT key FROM missing_symbol_batch WHERE key = ANY(%(keys)s::text[]);

-- name: try_lock
-- Claim batches for this transaction; a key another runner holds is skipped.
-- The caller re-reads missing_symbol_batch in a later statement (a new snapshot),
-- so a batch committed by the previous holder is seen and skipped.
SELECT k FROM unnest(%(keys)s::text[]) AS k
WHERE pg_try_advisory_xact_lock(hashtext('missing_symbol_batch'), hashtext(k));

-- name: create_staging
CREATE TEMP TABLE missing_symbol_staging (
    hash        text COLLATE "C" NOT NULL,
    debug_file  text NOT NULL,
    debug_id    text NOT NULL,
    code_file   text NOT NULL,
    code_id     text NOT NULL,
    day         integer NOT NULL,
    count       bigint NOT NULL,
    first_seen  double precision NOT NULL,
    last_seen   double precision NOT NULL
) ON COMMIT DROP;

-- name: copy_staging
COPY missing_symbol_staging (hash, debug_file, debug_id, code_file, code_id, day, count,
                             first_seen, last_seen)
FROM STDIN WITH (FORMAT text);

-- name: merge_symbols
-- One set-based upsert; rows in hash order so concurrent runners lock rows in the
-- same order and cannot deadlock.
INSERT INTO missing_symbol AS m (hash, debug_file, debug_id, code_file, code_id, count,
                                 first_seen, last_seen)
SELECT hash, min(debug_file), min(debug_id), min(code_file), min(code_id), sum(count),
       to_timestamp(min(first_seen)), to_timestamp(max(last_seen))
FROM missing_symbol_staging
GROUP BY hash
ORDER BY hash
ON CONFLICT (hash) DO UPDATE SET
    count = m.count + EXCLUDED.count,
    first_seen = LEAST(m.first_seen, EXCLUDED.first_seen),
    last_seen = GREATEST(m.last_seen, EXCLUDED.last_seen);

-- name: merge_symbols_unique
-- merge_symbols when each symbol has one day (the common case): staged rows then
-- hold each hash once and need no GROUP BY (a fifth of the merge).
INSERT INTO missing_symbol AS m (hash, debug_file, debug_id, code_file, code_id, count,
                                 first_seen, last_seen)
SELECT hash, debug_file, debug_id, code_file, code_id, count,
       to_timestamp(first_seen), to_timestamp(last_seen)
FROM missing_symbol_staging
ORDER BY hash
ON CONFLICT (hash) DO UPDATE SET
    count = m.count + EXCLUDED.count,
    first_seen = LEAST(m.first_seen, EXCLUDED.first_seen),
    last_seen = GREATEST(m.last_seen, EXCLUDED.last_seen);

-- name: merge_days
-- Staged rows come from one aggregate: each (hash, day) once, no grouping needed.
INSERT INTO missing_symbol_day AS d (hash, day, count)
SELECT hash, date '1970-01-01' + day, count
FROM missing_symbol_staging
ORDER BY hash, day
ON CONFLICT (hash, day) DO UPDATE SET count = d.count + EXCLUDED.count;

-- name: record_batches
-- execute_values template: (key, events, status, reason).
INSERT INTO missing_symbol_batch (key, events, status, reason) VALUES %s;

-- name: report_rows
-- One day's report: every symbol missed that day with that day's count.
SELECT s.debug_file, s.debug_id, s.code_file, s.code_id, d.count
FROM missing_symbol_day d JOIN missing_symbol s ON s.hash = d.hash
WHERE d.day = %(day)s
ORDER BY d.count DESC, s.debug_file, s.debug_id, s.code_file, s.code_id;

-- name: delete_old_symbols
-- One batch of symbols not seen for keep_days; the job repeats it until a batch is short.
DELETE FROM missing_symbol
WHERE hash IN (
    SELECT hash FROM missing_symbol
    WHERE last_seen < clock_timestamp() - make_interval(days => %(keep_days)s)
    LIMIT %(batch_size)s
);

-- name: delete_old_days
DELETE FROM missing_symbol_day
WHERE (hash, day) IN (
    SELECT hash, day FROM missing_symbol_day
    WHERE day < (clock_timestamp() AT TIME ZONE 'UTC')::date - %(keep_days)s
    LIMIT %(batch_size)s
);

-- name: totals
-- For tests and operators: lookups counted overall.
SELECT coalesce(sum(count), 0) AS lookups, count(*) AS symbols FROM missing_symbol;
