-- 0026: reruns v2, continued (issue #34 item 2): --parallel N, --downstream, workers that join
-- a rerun. Expand only: the release before this one never reads these columns (its reruns run
-- one interval at a time, alone, and resume by starting a run whose plan is what was left).
-- A rerun is a group of runs: the run that started it (its plan, its parallelism, whether it
-- reruns the job's dependants) and every run that worked on it after (`resumed_from` names the
-- first: a run that continued it after a kill, or a worker that joined it from another host).
-- parallel: how many of the group's intervals may be held at once (NULL: one). downstream:
-- the rerun goes on to the job's dependants. downstream_of: the dependant's rerun names the
-- rerun (the first run of its group) whose dates it redoes.
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS parallel integer;
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS downstream boolean;
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS downstream_of bigint;
CREATE INDEX IF NOT EXISTS crontabber_run_resumed_from_idx ON crontabber_run (resumed_from)
    WHERE resumed_from IS NOT NULL;
CREATE INDEX IF NOT EXISTS crontabber_run_downstream_of_idx ON crontabber_run (downstream_of)
    WHERE downstream_of IS NOT NULL;
