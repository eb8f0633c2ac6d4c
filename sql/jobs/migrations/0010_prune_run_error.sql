-- 0010: a prune run that failed records its error (one line), so `python -m jobs.prune
-- history` shows it instead of "unfinished (killed?)" (issue #13). finished_at is set too.
ALTER TABLE prune_run ADD COLUMN IF NOT EXISTS error text;
