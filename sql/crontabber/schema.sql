-- The runner's whole current schema (crontabber's tables and ours), applied idempotently on
-- first use by every runner, whatever its jobs: a site running other crontabber apps gets
-- these tables and no others. The symbol server's jobs have theirs in sql/jobs/schema.sql.
--
-- Every statement must be safe to run again on a database that already has
-- this schema, and on a database written by crontabber 0.18 (whose tables we
-- keep as they are and only add columns to). Changes to an existing schema
-- come as numbered files in migrations/ beside this file (sql/README.md);
-- a test checks that a database built from this file equals one built from the migrations.

-- crontabber 0.18's state table, column for column; no primary key, a unique index.
CREATE TABLE IF NOT EXISTS crontabber (
    app_name      text NOT NULL,
    next_run      timestamptz,
    first_run     timestamptz,
    last_run      timestamptz,
    last_success  timestamptz,
    ongoing       timestamptz,
    error_count   integer DEFAULT 0,
    depends_on    text[],
    last_error    json
);
-- crontabber before 0.12 lacked this column.
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS ongoing timestamptz;
-- Ours: who holds the ongoing marker ("host:pid"), for operators.
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS ongoing_by text;
CREATE UNIQUE INDEX IF NOT EXISTS crontabber_unique_app_name_idx ON crontabber (app_name);
-- Ours (migration 0005): heartbeat leases and fencing. run_id is the fencing
-- token of the run holding the marker (every state write of a run is
-- conditional on it); heartbeat is its holder's last renewal (database clock),
-- NULL for a marker set by a runner without heartbeats (crontabber 0.18).
CREATE SEQUENCE IF NOT EXISTS crontabber_run_id_seq;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS run_id bigint;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS heartbeat timestamptz;
-- Ours (migration 0006): a paused job is not run by cron ticks until paused_until.
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS paused_until timestamptz;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS paused_reason text;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS paused_by text;
-- Ours (migration 0017): a success declared by an operator (--mark-success): when, who, why;
-- the last success is a mark while last_success = success_marked_at.
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS success_marked_at timestamptz;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS success_marked_by text;
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS success_marked_reason text;

-- crontabber 0.18's run log: one row per successful unit or failed attempt.
CREATE TABLE IF NOT EXISTS crontabber_log (
    id            SERIAL NOT NULL,
    app_name      text NOT NULL,
    log_time      timestamptz DEFAULT now() NOT NULL,
    duration      interval,
    success       timestamptz,
    exc_type      text,
    exc_value     text,
    exc_traceback text
);
-- Ours (migration 0005): which run, host and process wrote the row.
ALTER TABLE crontabber_log ADD COLUMN IF NOT EXISTS run_id bigint;
ALTER TABLE crontabber_log ADD COLUMN IF NOT EXISTS host text;
ALTER TABLE crontabber_log ADD COLUMN IF NOT EXISTS pid integer;
-- Ours (migration 0009): a job's rows newest first, one run's rows (--history, --show-error).
CREATE INDEX IF NOT EXISTS crontabber_log_app_name_id_idx ON crontabber_log (app_name, id);
CREATE INDEX IF NOT EXISTS crontabber_log_app_name_run_id_idx ON crontabber_log (app_name, run_id);

-- Ours (migration 0012): the run ledger (issue #23). A run is a row from its claim: written by the claim with
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
-- Ours (migration 0020): the command line's option overrides a run ran with ('--name=value',
-- secrets masked; NULL: none).
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS options text[];

-- Ours (migration 0006): every operator action (force, rerun, reset, release, pause,
-- resume, mark-success): who (user@host), when, what, why.
CREATE TABLE IF NOT EXISTS crontabber_audit (
    id        bigserial PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor     text NOT NULL,
    action    text NOT NULL,
    app_name  text NOT NULL,
    reason    text,
    detail    json NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS crontabber_audit_at_idx ON crontabber_audit (at);

-- Ours (migration 0006): one row per host that ticked: its last tick, version and
-- clock skew against the database clock (--nagios, the dashboard).
CREATE TABLE IF NOT EXISTS crontabber_host (
    host          text PRIMARY KEY,
    version       text NOT NULL,
    last_tick     timestamptz NOT NULL,
    skew_seconds  double precision NOT NULL,
    pid           integer,
    schema_behind integer[]  -- the migrations its code lacks: it claims nothing (0016)
);
-- Ours (migration 0021): the host's tags (crontabber.host_tags, recorded by each tick; a job's
-- `hosts` option asks for one), and an operator's drain: a drained host claims nothing new
-- until drain_until (NULL: until --undrain); its running runs finish.
ALTER TABLE crontabber_host ADD COLUMN IF NOT EXISTS tags text[];
ALTER TABLE crontabber_host ADD COLUMN IF NOT EXISTS drained_at timestamptz;
ALTER TABLE crontabber_host ADD COLUMN IF NOT EXISTS drain_until timestamptz;
ALTER TABLE crontabber_host ADD COLUMN IF NOT EXISTS drained_by text;
ALTER TABLE crontabber_host ADD COLUMN IF NOT EXISTS drain_reason text;

-- Ours (migration 0013): alerts and the outbox of their notifications.
-- An alert: one event of one job (a failure streak, a silence, a takeover, a recovery, a
-- test), unique by (app_name, kind, subject), so whichever host's tick sees it first opens
-- it and no other host can open it again. Conditions that last (failing, silent) stay open
-- until they end (resolved_at); while open they are notified again every realert interval.
CREATE TABLE IF NOT EXISTS crontabber_alert (
    id               bigserial PRIMARY KEY,
    app_name         text NOT NULL,
    kind             text NOT NULL CONSTRAINT crontabber_alert_kind_check
                     CHECK (kind IN ('failing', 'recovered', 'superseded', 'silent', 'late',
                                     'takeover', 'test', 'old-code', 'broken-entry',
                                     'no-host', 'breach')),
    subject          text NOT NULL,
    opened_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    opened_by        text NOT NULL,
    message          text NOT NULL,
    detail           jsonb NOT NULL DEFAULT '{}',
    resolved_at      timestamptz,
    notified         integer NOT NULL DEFAULT 1,
    next_notice      timestamptz,
    UNIQUE (app_name, kind, subject)
);
CREATE INDEX IF NOT EXISTS crontabber_alert_open_idx ON crontabber_alert (id)
    WHERE resolved_at IS NULL AND kind IN ('failing', 'silent', 'late');
-- Ours (migration 0021): the open alerts of every lasting kind, no-host too (the sweep's).
CREATE INDEX IF NOT EXISTS crontabber_alert_open_lasting_idx ON crontabber_alert (id)
    WHERE resolved_at IS NULL AND kind IN ('failing', 'silent', 'late', 'no-host');

-- A notice: one notification of an alert to one target (the first, then one per re-alert).
-- The outbox of the fleet: a host claims due notices (FOR UPDATE SKIP LOCKED, a claim that
-- expires), sends, and marks them sent; a host killed between claim and send leaves a claim
-- that expires, and the next tick of any host sends it. A failed send is retried with backoff
-- until attempts run out (then given_up).
CREATE TABLE IF NOT EXISTS crontabber_notice (
    id            bigserial PRIMARY KEY,
    alert_id      bigint NOT NULL REFERENCES crontabber_alert (id) ON DELETE CASCADE,
    notice        integer NOT NULL,
    target        text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    next_attempt  timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts      integer NOT NULL DEFAULT 0,
    claimed_by    text,
    claim_until   timestamptz,
    sent_at       timestamptz,
    sent_by       text,
    given_up      boolean NOT NULL DEFAULT false,
    last_error    text,
    UNIQUE (alert_id, notice, target)
);
CREATE INDEX IF NOT EXISTS crontabber_notice_due_idx ON crontabber_notice (next_attempt)
    WHERE sent_at IS NULL AND NOT given_up;

-- Ours (migration 0014): maintenance windows of the alerts.
-- A maintenance window: alerts of one job (scope = its app_name), or of every job (scope
-- '*'), are muted until `until` (no alert opens, ends or repeats), with who and why, as a
-- pause has. The jobs still run.
CREATE TABLE IF NOT EXISTS crontabber_mute (
    scope    text PRIMARY KEY,
    until    timestamptz NOT NULL,
    muted_by text NOT NULL,
    reason   text NOT NULL,
    at       timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Ours (migration 0022): reruns v2, see migrations/0022_rerun_intervals.sql.
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
-- The named numbers a job returned with its summary (the last unit's): --history, --logs,
-- the metrics file, the checks (min_duration, slower_than, check).
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS metrics jsonb;
-- A rerun is a group: its first run (the plan, --parallel N, --downstream) and the runs that
-- worked on it after (resumed_from names the first); a dependant's rerun names the rerun whose
-- dates it redoes (downstream_of).
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS parallel integer;
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS downstream boolean;
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS downstream_of bigint;
CREATE INDEX IF NOT EXISTS crontabber_run_resumed_from_idx ON crontabber_run (resumed_from)
    WHERE resumed_from IS NOT NULL;
CREATE INDEX IF NOT EXISTS crontabber_run_downstream_of_idx ON crontabber_run (downstream_of)
    WHERE downstream_of IS NOT NULL;
