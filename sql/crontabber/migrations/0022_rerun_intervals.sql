-- 0022: reruns v2 (issue #34 item 2). Expand only: the release before this one never reads
-- or writes crontabber_interval, and its reruns hold the job's marker as they did.
-- A backfill job's intervals, one row each (job, interval start), as the runs of this
-- release claim them: a run takes the row (status running, its run id, a heartbeat renewed
-- with its lease) before it runs the interval, and writes how the interval ended. A --rerun
-- runs in a lane of its own (it does not hold the job's marker), so the job's scheduled runs
-- go on meanwhile; the row is what keeps the two from running one interval at once. A claim
-- whose heartbeat is older than lease_seconds is free again (its run died). `--rerun --only
-- failed|missing` reads the last outcome here.
CREATE TABLE IF NOT EXISTS crontabber_interval (
    app_name  text NOT NULL,
    starts    timestamptz NOT NULL,
    run_id    bigint NOT NULL,
    kind      text NOT NULL,
    holder    text NOT NULL,
    status    text NOT NULL,
    claimed   timestamptz NOT NULL,
    heartbeat timestamptz NOT NULL,
    ended     timestamptz,
    error     text,
    PRIMARY KEY (app_name, starts)
);
CREATE INDEX IF NOT EXISTS crontabber_interval_running_idx ON crontabber_interval (run_id)
    WHERE status = 'running';
-- A rerun's intervals in the order it runs them (--resume-run RUN continues that plan), and
-- the run it continues.
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS plan timestamptz[];
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS resumed_from bigint;
