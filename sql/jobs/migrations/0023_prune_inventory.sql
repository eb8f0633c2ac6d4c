-- 0023: a prune rule applied by an S3 Inventory report (source=inventory) records the report
-- it read (its manifest's s3:// address), so history says what a run deleted by. Expand only:
-- the release before this one ignores the column; NULL means the rule listed its prefix.
ALTER TABLE prune_rule_result ADD COLUMN IF NOT EXISTS inventory text;
