-- 0020: a run records the command line's option overrides it ran with (issue #32 item 12):
-- a forced run with --crontabber.class-X.inbox_bucket=... set the job's health, and nothing
-- but the operator's shell said which bucket it used. '--name=value' each, secrets masked;
-- NULL when none was given. Expand only: the release before this one ignores the column.
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS options text[];
