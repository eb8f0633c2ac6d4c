-- 0003: missing-symbol counts (issue #5): totals per symbol, counts per day, consumed batches.

-- One row per distinct missing symbol; hash = md5 of the four identifying fields
-- (jobs/missing_symbols/model.py: symbol_hash). code_file/code_id are '' when unknown.
CREATE TABLE IF NOT EXISTS missing_symbol (
    hash        text COLLATE "C" PRIMARY KEY,
    debug_file  text NOT NULL,
    debug_id    text NOT NULL,
    code_file   text NOT NULL DEFAULT '',
    code_id     text NOT NULL DEFAULT '',
    count       bigint NOT NULL CHECK (count > 0),
    first_seen  timestamptz NOT NULL,
    last_seen   timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS missing_symbol_last_seen_idx ON missing_symbol (last_seen);

-- Lookups per symbol and UTC day, so any day's report can be rebuilt.
CREATE TABLE IF NOT EXISTS missing_symbol_day (
    hash   text COLLATE "C" NOT NULL,
    day    date NOT NULL,
    count  bigint NOT NULL CHECK (count > 0),
    PRIMARY KEY (hash, day)
);
CREATE INDEX IF NOT EXISTS missing_symbol_day_day_idx ON missing_symbol_day (day);

-- One row per consumed batch (an S3 key under the inbox prefix), committed in the
-- same transaction as its counts: a key with a row is never consumed again.
-- status 'quarantined': the batch was rejected as a whole (reason says why) and
-- none of its events were counted.
CREATE TABLE IF NOT EXISTS missing_symbol_batch (
    key           text COLLATE "C" PRIMARY KEY,
    events        bigint NOT NULL,
    status        text NOT NULL CHECK (status IN ('ok', 'quarantined')),
    reason        text,
    processed_at  timestamptz NOT NULL DEFAULT now()
);
