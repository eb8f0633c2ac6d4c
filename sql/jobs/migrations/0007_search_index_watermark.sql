-- 0007: the incremental search-index job (jobs/search_index.py, IndexNewUploadsCronApp).
-- Its progress per alias: every upload finished up to indexed_to (minus the job's
-- overlap) is in index_name. A row naming another index than the alias's is stale.
CREATE TABLE IF NOT EXISTS search_index_watermark (
    alias       text PRIMARY KEY,
    index_name  text NOT NULL,
    indexed_to  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Its every-5-minutes read of the uploads finished since the watermark.
CREATE INDEX IF NOT EXISTS upload_completed_at_idx ON upload (completed_at)
    WHERE completed_at IS NOT NULL;
