-- 0015: a prune run holds a lease on its row instead of a session advisory lock, so that it
-- works through a transaction pooler (PgBouncer), where a session lock stays on a pooled
-- server connection. A live run renews lease_until; an unfinished run whose lease has passed
-- is dead, and the next run reconciles its intents. Expand only: the release before this one
-- ignores the column, and a run it started (lease_until NULL) is still judged by its
-- advisory lock (jobs/sql/prune.sql), until a later release drops that.
ALTER TABLE prune_run ADD COLUMN IF NOT EXISTS lease_until timestamptz;
