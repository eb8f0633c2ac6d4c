-- 0011: prune's audit equals what was deleted, even when a run is killed (issue #15). Before
-- each delete_objects batch a run writes the batch's keys and sizes here; the transaction that
-- adds the batch to its rule's counts deletes the row. A row left by a dead run is reconciled by
-- the next run: its keys gone from S3 are counted for the dead run, the rest dropped.
CREATE TABLE IF NOT EXISTS prune_intent (
    id      bigserial PRIMARY KEY,
    run_id  bigint NOT NULL,
    rule    text NOT NULL,
    bucket  text NOT NULL,
    keys    text[] NOT NULL,
    sizes   bigint[] NOT NULL,
    FOREIGN KEY (run_id, rule) REFERENCES prune_rule_result (run_id, rule) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS prune_intent_run_idx ON prune_intent (run_id);
