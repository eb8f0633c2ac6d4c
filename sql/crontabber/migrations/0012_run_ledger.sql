-- 0012: the run ledger (issue #23). A run is a row from its claim: written by the claim with
-- status 'running', its heartbeat moved by each lease renewal, its end written by the run
-- (succeeded, failed, timed out, stopped by signal, fenced off) or by whoever finds it dead
-- (abandoned). It holds the job's one-line summary and a capped, redacted tail of what the
-- job logged and printed, so on-call never needs the host that ran it.
-- crontabber_log keeps crontabber 0.18's one row per unit; its summary is ours.
CREATE TABLE IF NOT EXISTS crontabber_run (
    run_id          bigint PRIMARY KEY,
    app_name        text NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('scheduled', 'forced', 'rerun')),
    host            text NOT NULL,
    pid             integer NOT NULL,
    started         timestamptz NOT NULL,
    heartbeat       timestamptz,
    ended           timestamptz,
    status          text NOT NULL DEFAULT 'running'
                    CHECK (status IN ('running', 'succeeded', 'failed', 'timed out',
                                      'stopped by signal', 'fenced off', 'abandoned')),
    intervals       integer NOT NULL DEFAULT 0,
    first_interval  timestamptz,
    last_interval   timestamptz,
    summary         text,
    error           text,
    output          text NOT NULL DEFAULT '',
    output_dropped  bigint NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS crontabber_run_app_name_run_id_idx ON crontabber_run (app_name, run_id);
ALTER TABLE crontabber_log ADD COLUMN IF NOT EXISTS summary text;
