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
-- Ours (migration 0027): 'all' for a pause made by --pause all (the only pauses --resume all
-- ends), 'breach' for a breach pause (on_breach = pause), NULL for a job's own (--pause NAME).
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS paused_scope text;
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
-- Ours (migration 0029): a host that serves (--serve) records its tick_seconds: silent for
-- longer than that and a lease, it is gone (NULL: a cron tick's host).
ALTER TABLE crontabber_host ADD COLUMN IF NOT EXISTS serve_seconds real;
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
-- Ours (migration 0027): the checks a succeeded run breached ('; '-joined rules), written by the
-- tick that judged it: such a run is left out of the baseline later runs are judged against.
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS breach text;
-- Ours (migration 0030): the database user that wrote each run's ledger row (its claim): the
-- trigger's, whatever the writer sends, and kept by any later UPDATE of it (owner included), so
-- a breach pause can ask for a run of the calling user. NULL: a run recorded before 0030.
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS db_user text;
CREATE OR REPLACE FUNCTION crontabber_run_db_user() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.db_user := CASE WHEN TG_OP = 'INSERT' THEN session_user::text ELSE OLD.db_user END;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS crontabber_run_db_user ON crontabber_run;
CREATE TRIGGER crontabber_run_db_user BEFORE INSERT OR UPDATE OF db_user ON crontabber_run
    FOR EACH ROW EXECUTE FUNCTION crontabber_run_db_user();
-- The running runs (a tick sweeps the rerun runs killed without recording their end).
CREATE INDEX IF NOT EXISTS crontabber_run_running_idx ON crontabber_run (kind, heartbeat)
    WHERE status = 'running';

-- Ours (migration 0025): rights in PostgreSQL, see migrations/0025_roles.sql: the audit's
-- database user and hash chain, the operator actions as SECURITY DEFINER functions that write
-- their audit rows, three group roles and their grants (docs/deploy.md#roles).
ALTER TABLE crontabber_audit ADD COLUMN IF NOT EXISTS db_user text;
ALTER TABLE crontabber_audit ADD COLUMN IF NOT EXISTS prev_hash text;
ALTER TABLE crontabber_audit ADD COLUMN IF NOT EXISTS row_hash text;
CREATE TABLE IF NOT EXISTS crontabber_audit_head (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    last_id  bigint,
    row_hash text
);
INSERT INTO crontabber_audit_head (one) VALUES (true) ON CONFLICT DO NOTHING;

-- A row's hash: sha256 (built in since PostgreSQL 11) of a canonical text of its columns
-- (times in UTC, whatever the session's zone) and of the previous row's hash.
CREATE OR REPLACE FUNCTION crontabber_audit_hash(a crontabber_audit) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT encode(sha256(convert_to(json_build_array(
        a.id, to_char(a.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), a.actor, a.db_user,
        a.action, a.app_name, a.reason, a.detail, a.prev_hash)::text, 'UTF8')), 'hex')
$$;

-- The rows written before this migration, chained in id order (their database user unknown).
DO $$
DECLARE
    r crontabber_audit;
    prev text := (SELECT row_hash FROM crontabber_audit_head);
BEGIN
    FOR r IN SELECT * FROM crontabber_audit WHERE row_hash IS NULL ORDER BY id LOOP
        r.prev_hash := prev;
        r.row_hash := crontabber_audit_hash(r);
        UPDATE crontabber_audit SET prev_hash = r.prev_hash, row_hash = r.row_hash WHERE id = r.id;
        UPDATE crontabber_audit_head SET last_id = r.id, row_hash = r.row_hash;
        prev := r.row_hash;
    END LOOP;
END $$;

-- Every new row, whoever inserts it: under the head row's lock (writers queue; a writer in a
-- REPEATABLE READ transaction that raced another fails rather than forking the chain), a new
-- id taken after the lock (so id order is chain order), the session's user, the hashes.
CREATE OR REPLACE FUNCTION crontabber_audit_chain() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    head crontabber_audit_head;
BEGIN
    SELECT * INTO head FROM crontabber_audit_head WHERE one FOR UPDATE;
    NEW.id := nextval('crontabber_audit_id_seq');
    NEW.at := clock_timestamp();
    NEW.db_user := session_user;
    NEW.prev_hash := head.row_hash;
    NEW.row_hash := crontabber_audit_hash(NEW);
    UPDATE crontabber_audit_head SET last_id = NEW.id, row_hash = NEW.row_hash WHERE one;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS crontabber_audit_chain ON crontabber_audit;
CREATE TRIGGER crontabber_audit_chain BEFORE INSERT ON crontabber_audit
    FOR EACH ROW EXECUTE FUNCTION crontabber_audit_chain();

-- Only the tables' owner (or a superuser) may do what the other roles are refused: change or
-- delete audit rows, clear a job's run id (a release). Defence beside the grants, for a role
-- granted more than crontabber_grant_rights() gives.
CREATE OR REPLACE FUNCTION crontabber_owner_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'MEMBER') THEN
        RAISE EXCEPTION '% on % is for its owner only (current user %)', TG_OP, TG_TABLE_NAME, current_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;
DROP TRIGGER IF EXISTS crontabber_audit_append_only ON crontabber_audit;
CREATE TRIGGER crontabber_audit_append_only BEFORE UPDATE OR DELETE ON crontabber_audit
    FOR EACH ROW EXECUTE FUNCTION crontabber_owner_only();
DROP TRIGGER IF EXISTS crontabber_audit_no_truncate ON crontabber_audit;
CREATE TRIGGER crontabber_audit_no_truncate BEFORE TRUNCATE ON crontabber_audit
    FOR EACH STATEMENT EXECUTE FUNCTION crontabber_owner_only();
DROP TRIGGER IF EXISTS crontabber_release_owner_only ON crontabber;
CREATE TRIGGER crontabber_release_owner_only BEFORE UPDATE ON crontabber
    FOR EACH ROW WHEN (OLD.run_id IS NOT NULL AND NEW.run_id IS NULL)
    EXECUTE FUNCTION crontabber_owner_only();

-- An operator action's audit row (called by the functions below, as the owner): the action and
-- its subject are the function's; actor, reason and detail the caller's (actor: the database
-- user when the caller names none).
CREATE OR REPLACE FUNCTION crontabber_audit_action(p_action text, p_app_name text, p_audit json)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO crontabber_audit (actor, action, app_name, reason, detail)
    VALUES (COALESCE(p_audit ->> 'actor', session_user), p_action,
            p_app_name, p_audit ->> 'reason',
            COALESCE(p_audit -> 'detail', '{}'::json))
$$;

-- The operator actions. Each is the statement the store ran before this migration, and its
-- audit row, in one call; true when it changed something (and was audited).
CREATE OR REPLACE FUNCTION crontabber_pause(
    p_app_name text, p_depends_on text[], p_until timestamptz, p_replace boolean, p_audit json
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    INSERT INTO crontabber (app_name, error_count, depends_on, last_error,
                            paused_until, paused_reason, paused_by, paused_scope)
    VALUES (p_app_name, 0, p_depends_on, '{}', COALESCE(p_until, 'infinity'), p_audit ->> 'reason',
            COALESCE(p_audit ->> 'actor', session_user), p_audit -> 'detail' ->> 'scope')
    ON CONFLICT (app_name) DO UPDATE
    SET paused_until = EXCLUDED.paused_until, paused_reason = EXCLUDED.paused_reason,
        paused_by = EXCLUDED.paused_by, paused_scope = EXCLUDED.paused_scope
    WHERE p_replace OR crontabber.paused_until IS NULL
       OR crontabber.paused_until <= clock_timestamp();
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM crontabber_audit_action('pause', p_app_name, p_audit);
    RETURN true;
END $$;

-- on_breach = pause (crontabber/alerts/checks.py): the runner's one way to pause a job, and
-- only after the job's latest run breached a check, as the stored run shows (p_depends_on,
-- p_until and p_audit: the caller's, ignored since migration 0030).
-- Migration 0030: the run must be the job's latest finished scheduled run, succeeded, with a
-- breach recorded by its tick, the run the state row last recorded (what its own finish
-- writes), claimed by the calling database user; the audit's actor, reason and detail are the
-- function's.
CREATE OR REPLACE FUNCTION crontabber_breach_pause(
    p_app_name text, p_depends_on text[], p_until timestamptz, p_run_id bigint, p_audit json
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    r crontabber_run;
    took numeric;
BEGIN
    SELECT run.* INTO r
    FROM crontabber_run AS run JOIN crontabber AS c ON c.app_name = run.app_name
    WHERE run.run_id = p_run_id AND run.app_name = p_app_name AND run.kind = 'scheduled'
      AND run.status = 'succeeded' AND run.ended IS NOT NULL AND run.breach IS NOT NULL
      AND run.db_user = session_user
      AND c.last_run = run.started
      AND ((c.run_id = run.run_id AND c.ongoing IS NULL)
           OR (c.run_id > run.run_id AND c.ongoing IS NOT NULL))
      AND NOT EXISTS (SELECT 1 FROM crontabber_run AS later
                      WHERE later.app_name = p_app_name AND later.run_id > p_run_id
                        AND later.kind = 'scheduled' AND later.ended IS NOT NULL);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % is not the latest finished scheduled run of % with a breach '
                        'recorded by its tick, claimed by this database user: no breach pause',
                        p_run_id, p_app_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    took := round(extract(epoch FROM r.ended - r.started)::numeric, 2);
    -- its scope is 'breach' (--nagios warns of it; --resume all keeps it)
    RETURN crontabber_pause(
        p_app_name, NULL, NULL, false,
        json_build_object(
            'actor', 'crontabber',
            'reason', format('on_breach: run %s took %s s and breached %s', r.run_id, took,
                             left(r.breach, 200))
                      || COALESCE(' (its metrics: ' || left(r.metrics::text, 200) || ')', ''),
            'detail', json_build_object('outcome', 'done', 'run_id', r.run_id, 'host', r.host,
                                        'run_db_user', r.db_user,
                                        'breach', string_to_array(left(r.breach, 200), '; '),
                                        'scope', 'breach')));
END $$;

-- A resume of scope 'all' (--resume all) ends only a pause of that scope (--pause all's): a
-- job's own pause and a breach pause are someone's decision, ended by --resume NAME. Nothing
-- ended: nothing audited.
CREATE OR REPLACE FUNCTION crontabber_resume(p_app_name text, p_audit json) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    UPDATE crontabber SET paused_until = clock_timestamp()
    WHERE app_name = p_app_name AND paused_until > clock_timestamp()
      AND (p_audit -> 'detail' ->> 'scope' IS DISTINCT FROM 'all' OR paused_scope = 'all');
    IF NOT FOUND AND p_audit -> 'detail' ->> 'scope' = 'all' THEN
        RETURN;
    END IF;
    PERFORM crontabber_audit_action('resume', p_app_name, p_audit);
END $$;

-- release, reset and mark-success run under the row lock the caller took (lock_state).
CREATE OR REPLACE FUNCTION crontabber_release(p_app_name text, p_audit json) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    UPDATE crontabber
    SET ongoing = NULL, ongoing_by = NULL, heartbeat = NULL, run_id = NULL,
        next_run = COALESCE(next_run, clock_timestamp())
    WHERE app_name = p_app_name;
    PERFORM crontabber_audit_action('release', p_app_name, p_audit);
END $$;

CREATE OR REPLACE FUNCTION crontabber_reset(p_app_name text, p_audit json) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    DELETE FROM crontabber WHERE app_name = p_app_name;
    PERFORM crontabber_audit_action('reset', p_app_name, p_audit);
END $$;

CREATE OR REPLACE FUNCTION crontabber_mark_success(
    p_app_name text, p_now timestamptz, p_next_run timestamptz, p_audit json
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    UPDATE crontabber
    SET last_success = p_now, error_count = 0, last_error = '{}', next_run = p_next_run,
        first_run = COALESCE(first_run, p_now), success_marked_at = p_now,
        success_marked_by = COALESCE(p_audit ->> 'actor', session_user),
        success_marked_reason = p_audit ->> 'reason'
    WHERE app_name = p_app_name;
    PERFORM crontabber_audit_action('mark-success', p_app_name, p_audit);
END $$;

CREATE OR REPLACE FUNCTION crontabber_mute(
    p_scope text, p_until timestamptz, p_replace boolean, p_audit json
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    INSERT INTO crontabber_mute (scope, until, muted_by, reason)
    VALUES (p_scope, p_until, COALESCE(p_audit ->> 'actor', session_user), p_audit ->> 'reason')
    ON CONFLICT (scope) DO UPDATE
    SET until = EXCLUDED.until, muted_by = EXCLUDED.muted_by, reason = EXCLUDED.reason,
        at = clock_timestamp()
    WHERE p_replace OR crontabber_mute.until <= clock_timestamp();
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM crontabber_audit_action('mute', p_scope, p_audit);
    RETURN true;
END $$;

CREATE OR REPLACE FUNCTION crontabber_unmute(p_scope text, p_audit json) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    DELETE FROM crontabber_mute WHERE scope = p_scope AND until > clock_timestamp();
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM crontabber_audit_action('unmute', p_scope, p_audit);
    RETURN true;
END $$;

-- NULL: no host of that name ever ticked (nothing written); else whether it was drained.
-- A drain in force is replaced only when asked (--replace, recorded in the audit's overrides):
-- NULL otherwise, as for a host that never ticked (the caller tells the two apart), and
-- nothing audited. One statement, so two operators draining at once cannot both replace none.
CREATE OR REPLACE FUNCTION crontabber_drain(p_host text, p_until timestamptz, p_audit json)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    was boolean;
BEGIN
    UPDATE crontabber_host AS h
    SET drained_at = clock_timestamp(), drain_until = p_until,
        drained_by = COALESCE(p_audit ->> 'actor', session_user), drain_reason = p_audit ->> 'reason'
    FROM crontabber_host AS before
    WHERE h.host = p_host AND before.host = h.host
      AND (COALESCE((p_audit -> 'detail' -> 'overrides')::jsonb ? '--replace', false)
           OR before.drained_at IS NULL
           OR (before.drain_until IS NOT NULL AND before.drain_until <= clock_timestamp()))
    RETURNING before.drained_at IS NOT NULL
              AND (before.drain_until IS NULL OR before.drain_until > clock_timestamp())
    INTO was;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM crontabber_audit_action('drain', 'host:' || p_host, p_audit);
    RETURN was;
END $$;

CREATE OR REPLACE FUNCTION crontabber_undrain(p_host text, p_audit json) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    UPDATE crontabber_host
    SET drained_at = NULL, drain_until = NULL, drained_by = NULL, drain_reason = NULL
    WHERE host = p_host AND drained_at IS NOT NULL
      AND (drain_until IS NULL OR drain_until > clock_timestamp());
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM crontabber_audit_action('undrain', 'host:' || p_host, p_audit);
    RETURN true;
END $$;

-- Ours (migration 0030): the runner and operator roles may not DELETE the run log or the run
-- ledger; the retention job (jobs/runlog.py) deletes through these: one batch of the rows
-- older than p_keep_days, never fewer than 7 days (the last week stays whoever asks); the
-- number of rows deleted.
CREATE OR REPLACE FUNCTION crontabber_prune_log(p_keep_days integer, p_batch_size integer)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    deleted integer;
BEGIN
    IF p_keep_days IS NULL OR p_keep_days < 7 THEN
        RAISE EXCEPTION 'keep_days % is under 7: the run log keeps the last 7 days', p_keep_days
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM crontabber_log
    WHERE ctid IN (SELECT ctid FROM crontabber_log
                   WHERE log_time < clock_timestamp() - make_interval(days => p_keep_days)
                   LIMIT p_batch_size);
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END $$;

-- The same for the run ledger: runs that ended before the cut-off; a run still marked running
-- is kept whatever its age (whoever finds it dead records its end).
CREATE OR REPLACE FUNCTION crontabber_prune_runs(p_keep_days integer, p_batch_size integer)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    deleted integer;
BEGIN
    IF p_keep_days IS NULL OR p_keep_days < 7 THEN
        RAISE EXCEPTION 'keep_days % is under 7: the run ledger keeps the last 7 days',
            p_keep_days USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM crontabber_run
    WHERE run_id IN (SELECT run_id FROM crontabber_run
                     WHERE ended < clock_timestamp() - make_interval(days => p_keep_days)
                     LIMIT p_batch_size);
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END $$;
REVOKE ALL ON FUNCTION crontabber_prune_log(integer, integer),
    crontabber_prune_runs(integer, integer)
FROM PUBLIC;

REVOKE ALL ON FUNCTION crontabber_pause(text, text[], timestamptz, boolean, json),
    crontabber_breach_pause(text, text[], timestamptz, bigint, json),
    crontabber_resume(text, json), crontabber_release(text, json), crontabber_reset(text, json),
    crontabber_mark_success(text, timestamptz, timestamptz, json),
    crontabber_mute(text, timestamptz, boolean, json), crontabber_unmute(text, json),
    crontabber_drain(text, timestamptz, json), crontabber_undrain(text, json),
    crontabber_audit_action(text, text, json), crontabber_audit_chain()
FROM PUBLIC;

-- A bounded wait for every lock these functions take (migration 0028): a session that holds
-- the audit head's row or a job's row (a stuck runner, or one that means harm: the runner
-- login may insert audit rows and update run columns) makes an operator's action fail after
-- 5 s, naming the holder (crontabber.store), instead of hanging. A function's SET lasts for
-- its call only, so it holds through PgBouncer's transaction pooling. (A later
-- CREATE OR REPLACE of one of them must repeat it.)
ALTER FUNCTION crontabber_audit_chain() SET lock_timeout = '5s';
ALTER FUNCTION crontabber_audit_action(text, text, json) SET lock_timeout = '5s';
ALTER FUNCTION crontabber_pause(text, text[], timestamptz, boolean, json) SET lock_timeout = '5s';
ALTER FUNCTION crontabber_breach_pause(text, text[], timestamptz, bigint, json) SET lock_timeout = '5s';
ALTER FUNCTION crontabber_resume(text, json) SET lock_timeout = '5s';
ALTER FUNCTION crontabber_release(text, json) SET lock_timeout = '5s';
ALTER FUNCTION crontabber_reset(text, json) SET lock_timeout = '5s';
ALTER FUNCTION crontabber_mark_success(text, timestamptz, timestamptz, json) SET lock_timeout = '5s';
ALTER FUNCTION crontabber_mute(text, timestamptz, boolean, json) SET lock_timeout = '5s';
ALTER FUNCTION crontabber_unmute(text, json) SET lock_timeout = '5s';
ALTER FUNCTION crontabber_drain(text, timestamptz, json) SET lock_timeout = '5s';
ALTER FUNCTION crontabber_undrain(text, json) SET lock_timeout = '5s';

-- Ours (migration 0031): a run's writes to the state row go through these functions, keyed
-- on its run id (see migrations/0031_run_functions.sql).
-- The lease the claiming runner holds its run under (its lease_seconds): a takeover waits for
-- the holder's own lease, whatever the taker's configuration says. NULL: a run claimed before
-- migration 0031 (the taker's lease applies, as before).
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS lease_seconds double precision;

-- Whether run p_run_id of p_app_name holds the job's marker and was claimed by the calling
-- database user: what every write of a run to the state row asks first.
CREATE OR REPLACE FUNCTION crontabber_own_run(p_app_name text, p_run_id bigint) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM crontabber AS c JOIN crontabber_run AS r ON r.run_id = c.run_id
                   WHERE c.app_name = p_app_name AND c.run_id = p_run_id
                     AND c.ongoing IS NOT NULL AND r.db_user = session_user)
$$;

CREATE OR REPLACE FUNCTION crontabber_lock_state(p_app_name text, p_host text)
RETURNS TABLE (app_name text, next_run timestamptz, first_run timestamptz,
               last_run timestamptz, last_success timestamptz, ongoing timestamptz,
               ongoing_by text, error_count integer, depends_on text[], last_error json,
               run_id bigint, heartbeat timestamptz, paused_until timestamptz,
               paused_reason text, paused_by text, paused_scope text,
               success_marked_at timestamptz, success_marked_by text,
               success_marked_reason text, now timestamptz, drained boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT c.app_name, c.next_run, c.first_run, c.last_run, c.last_success, c.ongoing,
           c.ongoing_by, c.error_count, c.depends_on, c.last_error, c.run_id, c.heartbeat,
           c.paused_until, c.paused_reason, c.paused_by, c.paused_scope,
           c.success_marked_at, c.success_marked_by, c.success_marked_reason,
           clock_timestamp(),
           EXISTS (SELECT 1 FROM crontabber_host AS h
                   WHERE h.host = p_host AND h.drained_at IS NOT NULL
                     AND (h.drain_until IS NULL OR h.drain_until > clock_timestamp()))
    FROM crontabber AS c
    WHERE c.app_name = p_app_name
    FOR UPDATE OF c NOWAIT;
END $$;

CREATE OR REPLACE FUNCTION crontabber_claim_next(
    p_names text[], p_depends jsonb, p_host text, p_pid integer, p_holder text,
    p_options text[], p_lease_seconds double precision
) RETURNS TABLE (app_name text, next_run timestamptz, first_run timestamptz,
                 last_run timestamptz, last_success timestamptz, ongoing timestamptz,
                 ongoing_by text, error_count integer, depends_on text[], last_error json,
                 run_id bigint, heartbeat timestamptz, paused_until timestamptz,
                 paused_reason text, paused_by text, paused_scope text,
                 success_marked_at timestamptz, success_marked_by text,
                 success_marked_reason text, pos bigint, now timestamptz, drained boolean,
                 still_due text[], claimed_run_id bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH candidate AS (
        SELECT c.*, n.pos
        FROM unnest(p_names) WITH ORDINALITY AS n(app_name, pos)
        CROSS JOIN LATERAL (
            SELECT s.app_name, s.next_run, s.first_run, s.last_run, s.last_success, s.ongoing,
                   s.ongoing_by, s.error_count, s.depends_on, s.last_error, s.run_id,
                   s.heartbeat, s.paused_until, s.paused_reason, s.paused_by, s.paused_scope,
                   s.success_marked_at, s.success_marked_by, s.success_marked_reason
            FROM crontabber AS s
            WHERE s.app_name = n.app_name
              AND (s.next_run IS NULL OR s.next_run < clock_timestamp())
            OFFSET 0
        ) AS c
        ORDER BY n.pos
        LIMIT 1
        FOR UPDATE OF c SKIP LOCKED
    ), clock AS (
        SELECT clock_timestamp() AS now,
               ARRAY(SELECT d.app_name
                     FROM unnest(p_names) WITH ORDINALITY AS n(app_name, pos)
                     CROSS JOIN LATERAL (
                         SELECT s.app_name FROM crontabber AS s
                         WHERE s.app_name = n.app_name
                           AND (s.next_run IS NULL OR s.next_run < clock_timestamp())
                         OFFSET 0
                     ) AS d
                     WHERE n.pos < COALESCE((SELECT candidate.pos FROM candidate), 2147483647)
                    ) AS still_due,
               EXISTS (SELECT 1 FROM crontabber_host AS h
                       WHERE h.host = p_host AND h.drained_at IS NOT NULL
                         AND (h.drain_until IS NULL OR h.drain_until > clock_timestamp()))
                   AS drained
    ), claimed AS (
        UPDATE crontabber AS c
        SET ongoing = clock.now, ongoing_by = p_holder, heartbeat = clock.now,
            depends_on = ARRAY(SELECT jsonb_array_elements_text(p_depends -> c.app_name)),
            run_id = nextval('crontabber_run_id_seq')
        FROM candidate, clock
        WHERE c.app_name = candidate.app_name AND candidate.ongoing IS NULL
          AND NOT clock.drained
        RETURNING c.app_name, c.run_id
    ), ledger AS (
        INSERT INTO crontabber_run (run_id, app_name, kind, host, pid, started, heartbeat,
                                    options, lease_seconds)
        SELECT claimed.run_id, claimed.app_name, 'scheduled', p_host, p_pid, clock.now,
               clock.now, p_options, p_lease_seconds
        FROM claimed, clock
    )
    SELECT candidate.app_name, candidate.next_run, candidate.first_run, candidate.last_run,
           candidate.last_success, candidate.ongoing, candidate.ongoing_by,
           candidate.error_count, candidate.depends_on, candidate.last_error, candidate.run_id,
           candidate.heartbeat, candidate.paused_until, candidate.paused_reason,
           candidate.paused_by, candidate.paused_scope, candidate.success_marked_at,
           candidate.success_marked_by, candidate.success_marked_reason, candidate.pos,
           clock.now, clock.drained, clock.still_due, claimed.run_id
    FROM clock LEFT JOIN candidate ON true LEFT JOIN claimed ON true;
END $$;

-- A claim of a job whose row the caller locked (crontabber_lock_state); the new run id. The
-- marker of a run it takes over is recorded abandoned here (p_exc_type, p_exc_value: the
-- failure's record, written once per run).
CREATE OR REPLACE FUNCTION crontabber_claim(
    p_app_name text, p_kind text, p_depends_on text[], p_now timestamptz, p_holder text,
    p_host text, p_pid integer, p_options text[], p_lease_seconds double precision,
    p_exc_type text, p_exc_value text
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    s crontabber;
    holder crontabber_run;
    at timestamptz := clock_timestamp();
    new_id bigint;
BEGIN
    IF p_now > at OR p_kind NOT IN ('scheduled', 'forced') THEN
        RAISE EXCEPTION 'a claim of % at % (kind %): not a claim a runner makes', p_app_name,
            p_now, p_kind USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO s FROM crontabber WHERE crontabber.app_name = p_app_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no state row for %', p_app_name USING ERRCODE = 'no_data_found';
    END IF;
    IF p_kind = 'scheduled' AND s.next_run IS NOT NULL AND s.next_run >= at THEN
        RAISE EXCEPTION '% is not due (next run %): a scheduled claim waits for it',
            p_app_name, s.next_run USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF s.ongoing IS NOT NULL THEN
        SELECT * INTO holder FROM crontabber_run WHERE crontabber_run.run_id = s.run_id;
        IF NOT ((s.heartbeat IS NOT NULL
                 AND s.heartbeat < at - make_interval(
                     secs => COALESCE(holder.lease_seconds, p_lease_seconds)))
                -- crontabber 0.18's marker (ours always have a heartbeat): its rule is the
                -- runner's (max_ongoing_age_hours)
                OR s.heartbeat IS NULL
                OR (substring(s.ongoing_by from '^(.*):[0-9]+$') = p_host
                    AND holder.db_user = session_user)) THEN
            RAISE EXCEPTION 'run % of % is live (its last heartbeat %, its lease % s): '
                            'not taken over', s.run_id, p_app_name, s.heartbeat,
                            COALESCE(holder.lease_seconds, p_lease_seconds)
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        UPDATE crontabber_run SET status = 'abandoned', ended = clock_timestamp(),
                                  error = p_exc_value
        WHERE crontabber_run.run_id = s.run_id AND status = 'running';
        INSERT INTO crontabber_log (app_name, log_time, duration, exc_type, exc_value,
                                    exc_traceback, run_id, host, pid)
        SELECT s.app_name, clock_timestamp(), COALESCE(s.heartbeat, s.ongoing) - s.ongoing,
               p_exc_type, p_exc_value, '', s.run_id,
               substring(s.ongoing_by from '^(.*):[0-9]+$'),
               substring(s.ongoing_by from ':([0-9]+)$')::integer
        WHERE NOT EXISTS (SELECT 1 FROM crontabber_log AS log
                          WHERE log.app_name = p_app_name AND log.run_id = s.run_id
                            AND log.exc_type = p_exc_type);
    END IF;
    UPDATE crontabber
    SET ongoing = p_now, ongoing_by = p_holder, depends_on = p_depends_on,
        run_id = nextval('crontabber_run_id_seq'), heartbeat = p_now
    WHERE crontabber.app_name = p_app_name
    RETURNING crontabber.run_id INTO new_id;
    INSERT INTO crontabber_run (run_id, app_name, kind, host, pid, started, heartbeat, options,
                                lease_seconds)
    VALUES (new_id, p_app_name, p_kind, p_host, p_pid, p_now, p_now, p_options,
            p_lease_seconds);
    RETURN new_id;
END $$;

-- Renew a run's lease (no row: it no longer holds the job, or another login claimed it), with
-- its ledger row (the output captured so far when it grew) and the interval it works on.
CREATE OR REPLACE FUNCTION crontabber_heartbeat(
    p_app_name text, p_run_id bigint, p_output text, p_dropped bigint
) RETURNS TABLE (heartbeat timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH renewed AS (
        UPDATE crontabber AS c SET heartbeat = clock_timestamp()
        WHERE c.app_name = p_app_name AND c.run_id = p_run_id AND c.ongoing IS NOT NULL
          AND crontabber_own_run(p_app_name, p_run_id)
        RETURNING c.run_id, c.heartbeat
    ), ledger AS (
        UPDATE crontabber_run AS run
        SET heartbeat = renewed.heartbeat, output = COALESCE(p_output, run.output),
            output_dropped = COALESCE(p_dropped, run.output_dropped)
        FROM renewed
        WHERE run.run_id = renewed.run_id
    ), intervals AS (
        UPDATE crontabber_interval AS i SET heartbeat = renewed.heartbeat
        FROM renewed
        WHERE i.run_id = renewed.run_id AND i.status = 'running'
    )
    SELECT renewed.heartbeat FROM renewed;
END $$;

-- A successful unit's progress (GREATEST: a --rerun of past days never moves last_success
-- backwards; never later than the database's clock); false: the run no longer holds the job,
-- nothing written.
CREATE OR REPLACE FUNCTION crontabber_unit(p_app_name text, p_run_id bigint,
                                           p_success timestamptz) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    UPDATE crontabber SET last_success = GREATEST(last_success, p_success)
    WHERE app_name = p_app_name AND run_id = p_run_id AND ongoing IS NOT NULL
      AND p_success <= clock_timestamp() AND crontabber_own_run(p_app_name, p_run_id);
    RETURN FOUND;
END $$;

-- The end of an attempt on the state row (crontabber.sql's finish says the rule); no row: the
-- run no longer holds the job, nothing written.
CREATE OR REPLACE FUNCTION crontabber_finish(
    p_app_name text, p_run_id bigint, p_started timestamptz, p_next_run timestamptz,
    p_succeeded boolean, p_keeps_health boolean, p_last_error json, p_depends_on text[]
) RETURNS TABLE (app_name text, next_run timestamptz, first_run timestamptz,
                 last_run timestamptz, last_success timestamptz, ongoing timestamptz,
                 ongoing_by text, error_count integer, depends_on text[], last_error json,
                 run_id bigint, heartbeat timestamptz, paused_until timestamptz,
                 paused_reason text, paused_by text, paused_scope text,
                 success_marked_at timestamptz, success_marked_by text,
                 success_marked_reason text, now timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    UPDATE crontabber AS c
    SET first_run = COALESCE(c.first_run, p_started),
        last_run = p_started,
        next_run = CASE WHEN p_keeps_health THEN c.next_run ELSE p_next_run END,
        error_count = CASE WHEN p_keeps_health THEN c.error_count
                           WHEN p_succeeded THEN 0 ELSE COALESCE(c.error_count, 0) + 1 END,
        last_error = CASE WHEN p_keeps_health THEN c.last_error ELSE p_last_error END,
        depends_on = p_depends_on,
        ongoing = NULL,
        ongoing_by = NULL,
        heartbeat = NULL
    WHERE c.app_name = p_app_name AND c.run_id = p_run_id AND c.ongoing IS NOT NULL
      AND crontabber_own_run(p_app_name, p_run_id)
    RETURNING c.app_name, c.next_run, c.first_run, c.last_run, c.last_success, c.ongoing,
              c.ongoing_by, c.error_count, c.depends_on, c.last_error, c.run_id, c.heartbeat,
              c.paused_until, c.paused_reason, c.paused_by, c.paused_scope,
              c.success_marked_at, c.success_marked_by, c.success_marked_reason,
              clock_timestamp();
END $$;

-- An ordinary run that succeeded, ended in one statement (crontabber.sql's finish_ordinary).
CREATE OR REPLACE FUNCTION crontabber_finish_ordinary(
    p_app_name text, p_run_id bigint, p_host text, p_pid integer, p_success timestamptz,
    p_duration interval, p_summary text, p_metrics jsonb, p_started timestamptz,
    p_next_run timestamptz, p_keeps_health boolean, p_last_error json, p_depends_on text[],
    p_status text, p_error text, p_output text, p_dropped bigint
) RETURNS TABLE (app_name text, next_run timestamptz, first_run timestamptz,
                 last_run timestamptz, last_success timestamptz, ongoing timestamptz,
                 ongoing_by text, error_count integer, depends_on text[], last_error json,
                 run_id bigint, heartbeat timestamptz, paused_until timestamptz,
                 paused_reason text, paused_by text, paused_scope text,
                 success_marked_at timestamptz, success_marked_by text,
                 success_marked_reason text, now timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH ended AS (
        UPDATE crontabber AS c
        SET last_success = GREATEST(c.last_success, p_success),
            first_run = COALESCE(c.first_run, p_started),
            last_run = p_started,
            next_run = CASE WHEN p_keeps_health THEN c.next_run ELSE p_next_run END,
            error_count = CASE WHEN p_keeps_health THEN c.error_count ELSE 0 END,
            last_error = CASE WHEN p_keeps_health THEN c.last_error ELSE p_last_error END,
            depends_on = p_depends_on,
            ongoing = NULL,
            ongoing_by = NULL,
            heartbeat = NULL
        WHERE c.app_name = p_app_name AND c.run_id = p_run_id AND c.ongoing IS NOT NULL
          AND (p_success IS NULL OR p_success <= clock_timestamp())
          AND crontabber_own_run(p_app_name, p_run_id)
        RETURNING c.app_name, c.next_run, c.first_run, c.last_run, c.last_success, c.ongoing,
                  c.ongoing_by, c.error_count, c.depends_on, c.last_error, c.run_id,
                  c.heartbeat, c.paused_until, c.paused_reason, c.paused_by, c.paused_scope,
                  c.success_marked_at, c.success_marked_by, c.success_marked_reason,
                  clock_timestamp() AS now
    ), ledger AS (
        UPDATE crontabber_run AS run
        SET intervals = run.intervals + CASE WHEN p_success IS NULL THEN 0 ELSE 1 END,
            first_interval = LEAST(run.first_interval, p_success),
            last_interval = GREATEST(run.last_interval, p_success),
            summary = COALESCE(p_summary, run.summary),
            metrics = COALESCE(p_metrics, run.metrics),
            ended = clock_timestamp(), status = p_status,
            error = p_error, output = p_output, output_dropped = p_dropped
        WHERE run.run_id = p_run_id AND run.status IN ('running', 'abandoned')
          AND EXISTS (SELECT 1 FROM ended)
    ), logged AS (
        INSERT INTO crontabber_log (app_name, duration, success, run_id, host, pid, summary)
        SELECT ended.app_name, p_duration, p_success, ended.run_id, p_host, p_pid, p_summary
        FROM ended
        WHERE p_success IS NOT NULL
    )
    SELECT * FROM ended;
END $$;

-- A schedule change's next run (crontabber/schedule_store.py), only if no run took the job and
-- nobody moved next_run since it was read; false: nothing written.
CREATE OR REPLACE FUNCTION crontabber_reschedule(p_app_name text, p_next_run timestamptz,
                                                 p_was timestamptz) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    UPDATE crontabber SET next_run = p_next_run
    WHERE app_name = p_app_name AND ongoing IS NULL AND next_run IS NOT DISTINCT FROM p_was;
    RETURN FOUND;
END $$;

REVOKE ALL ON FUNCTION crontabber_own_run(text, bigint), crontabber_lock_state(text, text),
    crontabber_claim_next(text[], jsonb, text, integer, text, text[], double precision),
    crontabber_claim(text, text, text[], timestamptz, text, text, integer, text[],
                     double precision, text, text),
    crontabber_heartbeat(text, bigint, text, bigint),
    crontabber_unit(text, bigint, timestamptz),
    crontabber_finish(text, bigint, timestamptz, timestamptz, boolean, boolean, json, text[]),
    crontabber_finish_ordinary(text, bigint, text, integer, timestamptz, interval, text, jsonb,
                               timestamptz, timestamptz, boolean, json, text[], text, text,
                               text, bigint),
    crontabber_reschedule(text, timestamptz, timestamptz)
FROM PUBLIC;

-- Notices (migration 0031): the runner and operator logins no longer UPDATE or DELETE
-- crontabber_notice (a runner login set given_up on every pending notice, silencing them);
-- a notice is claimed, sent or failed through these functions, by the login that claimed it.
-- The login that claimed a notice last (its claim's fencing token with claimed_by).
ALTER TABLE crontabber_notice ADD COLUMN IF NOT EXISTS claimed_db_user text;

-- Claim up to p_limit due notices (new, retried, or left by a claim that expired; with
-- p_alert_ids, only those alerts' notices; without, never a test's) for p_host ('host:pid')
-- until p_claim_seconds from now. p_dead: holders of p_host's own host whose process is gone:
-- their claims are taken over at once, when the same login made them.
CREATE OR REPLACE FUNCTION crontabber_notices_claim(
    p_host text, p_claim_seconds double precision, p_limit integer, p_dead text[],
    p_alert_ids bigint[]
) RETURNS TABLE (id bigint, alert_id bigint, notice integer, target text, attempts integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH due AS (
        SELECT n.id FROM crontabber_notice AS n
        WHERE n.sent_at IS NULL AND NOT n.given_up AND n.next_attempt <= clock_timestamp()
          AND (n.claim_until IS NULL OR n.claim_until < clock_timestamp()
               OR (n.claimed_by = ANY(p_dead)
                   AND substring(n.claimed_by from '^(.*):[0-9]+$')
                       = substring(p_host from '^(.*):[0-9]+$')
                   -- (NULL: a claim made before migration 0031)
                   AND COALESCE(n.claimed_db_user, session_user) = session_user))
          AND (p_alert_ids IS NULL OR n.alert_id = ANY(p_alert_ids))
          AND (p_alert_ids IS NOT NULL
               OR NOT EXISTS (SELECT 1 FROM crontabber_alert AS t
                              WHERE t.id = n.alert_id AND t.kind = 'test'))
        ORDER BY n.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE crontabber_notice AS n
    SET claimed_by = p_host, claimed_db_user = session_user, attempts = n.attempts + 1,
        claim_until = clock_timestamp() + make_interval(secs => p_claim_seconds)
    FROM due WHERE n.id = due.id
    RETURNING n.id, n.alert_id, n.notice, n.target, n.attempts;
END $$;

-- A notice delivered, recorded by the claim that sent it; false: not this login's claim.
CREATE OR REPLACE FUNCTION crontabber_notice_sent(p_id bigint, p_host text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    UPDATE crontabber_notice
    SET sent_at = clock_timestamp(), sent_by = p_host, claimed_by = NULL, claim_until = NULL,
        last_error = NULL
    WHERE id = p_id AND sent_at IS NULL AND claimed_by = p_host
      AND claimed_db_user = session_user;
    RETURN FOUND;
END $$;

-- A failed attempt of this login's claim: retried after p_retry_seconds, or given up once
-- p_max_attempts (at least 1) were made; NULL: not this login's claim.
CREATE OR REPLACE FUNCTION crontabber_notice_failed(
    p_id bigint, p_host text, p_error text, p_retry_seconds double precision,
    p_max_attempts integer
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    gave_up boolean;
BEGIN
    UPDATE crontabber_notice
    SET claimed_by = NULL, claim_until = NULL, last_error = p_error,
        next_attempt = clock_timestamp() + make_interval(secs => p_retry_seconds),
        given_up = attempts >= GREATEST(p_max_attempts, 1)
    WHERE id = p_id AND sent_at IS NULL AND claimed_by = p_host
      AND claimed_db_user = session_user
    RETURNING given_up INTO gave_up;
    RETURN gave_up;
END $$;

REVOKE ALL ON FUNCTION
    crontabber_notices_claim(text, double precision, integer, text[], bigint[]),
    crontabber_notice_sent(bigint, text),
    crontabber_notice_failed(bigint, text, text, double precision, integer)
FROM PUBLIC;

-- The run ledger and the intervals (migration 0031): a login changes only the runs it claimed
-- (crontabber_run.db_user) and the intervals they hold; what one run records of another's (a
-- run found dead, an interval taken over) goes through the functions below, which judge it by
-- the other run's own lease. The owner (and these functions, which run as the owner) may.
CREATE OR REPLACE FUNCTION crontabber_ledger_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    claimer text;
BEGIN
    IF pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'USAGE')
    THEN
        RETURN NEW;
    END IF;
    IF TG_TABLE_NAME = 'crontabber_run' THEN
        claimer := OLD.db_user;
    ELSE
        SELECT r.db_user INTO claimer FROM crontabber_run AS r WHERE r.run_id = OLD.run_id;
    END IF;
    IF claimer IS DISTINCT FROM session_user THEN
        RAISE EXCEPTION 'run % was claimed by the database user %: % may not change it',
            OLD.run_id, COALESCE(claimer, '(unknown)'), session_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS crontabber_run_guard ON crontabber_run;
CREATE TRIGGER crontabber_run_guard BEFORE UPDATE ON crontabber_run
    FOR EACH ROW EXECUTE FUNCTION crontabber_ledger_guard();
DROP TRIGGER IF EXISTS crontabber_interval_guard ON crontabber_interval;
CREATE TRIGGER crontabber_interval_guard BEFORE UPDATE ON crontabber_interval
    FOR EACH ROW EXECUTE FUNCTION crontabber_ledger_guard();

-- Whether run r (a row of crontabber_run) may be recorded dead by the calling login: its own
-- (this login claimed it), or its heartbeat is older than its own lease (p_lease_seconds, the
-- caller's, only for a run that stored none: claimed before migration 0031).
CREATE OR REPLACE FUNCTION crontabber_run_expired(r crontabber_run, p_lease_seconds double precision)
RETURNS boolean
LANGUAGE sql SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT r.db_user = session_user
        OR COALESCE(r.heartbeat, r.started)
           < clock_timestamp() - make_interval(secs => COALESCE(r.lease_seconds, p_lease_seconds))
$$;

-- The rerun runs killed without recording their end (no heartbeat for their lease): recorded
-- abandoned by the tick of p_host (p_lease_seconds 0: not swept); how many.
CREATE OR REPLACE FUNCTION crontabber_sweep_lanes(p_host text, p_lease_seconds double precision)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    swept integer;
BEGIN
    UPDATE crontabber_run AS r
    SET status = 'abandoned', ended = clock_timestamp(),
        error = 'killed without recording its end: no heartbeat since '
                || to_char(COALESCE(r.heartbeat, r.started) AT TIME ZONE 'UTC',
                           'YYYY-MM-DD HH24:MI:SS')
                || ' UTC (its lease expired); recorded by the tick of ' || p_host
    WHERE r.status = 'running' AND r.kind = 'rerun' AND p_lease_seconds > 0
      AND COALESCE(r.heartbeat, r.started)
          < clock_timestamp() - make_interval(secs => COALESCE(r.lease_seconds, p_lease_seconds));
    GET DIAGNOSTICS swept = ROW_COUNT;
    RETURN swept;
END $$;

-- The job's other rerun runs killed without recording their end, abandoned by run p_run_id
-- (on p_host) that is about to take their intervals over.
CREATE OR REPLACE FUNCTION crontabber_abandon_expired_lanes(
    p_app_name text, p_run_id bigint, p_host text, p_lease_seconds double precision
) RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    RETURN QUERY
    UPDATE crontabber_run AS r
    SET status = 'abandoned', ended = clock_timestamp(),
        error = 'killed without recording its end: no heartbeat since '
                || to_char(COALESCE(r.heartbeat, r.started) AT TIME ZONE 'UTC',
                           'YYYY-MM-DD HH24:MI:SS')
                || ' UTC (its lease expired); recorded by run ' || p_run_id || ' on ' || p_host
    WHERE r.app_name = p_app_name AND r.status = 'running' AND r.kind = 'rerun'
      AND r.run_id <> p_run_id
      AND COALESCE(r.heartbeat, r.started)
          < clock_timestamp() - make_interval(secs => COALESCE(r.lease_seconds, p_lease_seconds))
    RETURNING r.run_id;
END $$;

-- A run killed without recording its end (its process on the caller's host is gone, or its
-- lease expired): recorded abandoned when crontabber_run_expired allows; false otherwise.
CREATE OR REPLACE FUNCTION crontabber_abandon_run(
    p_run_id bigint, p_error text, p_lease_seconds double precision
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    UPDATE crontabber_run AS r
    SET status = 'abandoned', ended = clock_timestamp(), error = p_error
    WHERE r.run_id = p_run_id AND r.status = 'running'
      AND crontabber_run_expired(r, p_lease_seconds);
    RETURN FOUND;
END $$;

-- Take interval p_starts of a backfill job for run p_run_id (the caller's own), under the
-- row's lock (the upsert's): free when it never ran, its last run of it ended, its holder's
-- run stopped renewing it for that run's own lease, or no longer counts as running. The run's
-- lease is recorded with its first interval when its claim stored none (a rerun's). NULL: held.
CREATE OR REPLACE FUNCTION crontabber_claim_interval(
    p_app_name text, p_starts timestamptz, p_run_id bigint, p_kind text, p_holder text,
    p_lease_seconds double precision
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    taken bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM crontabber_run
                   WHERE run_id = p_run_id AND app_name = p_app_name AND status = 'running'
                     AND db_user = session_user) THEN
        RAISE EXCEPTION 'run % of % is not a running run of this database user (%)', p_run_id,
            p_app_name, session_user USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE crontabber_run SET lease_seconds = p_lease_seconds
    WHERE run_id = p_run_id AND lease_seconds IS NULL;
    INSERT INTO crontabber_interval AS i (app_name, starts, run_id, kind, holder, status,
                                          claimed, heartbeat)
    VALUES (p_app_name, p_starts, p_run_id, p_kind, p_holder, 'running',
            clock_timestamp(), clock_timestamp())
    ON CONFLICT (app_name, starts) DO UPDATE
    SET run_id = EXCLUDED.run_id, kind = EXCLUDED.kind, holder = EXCLUDED.holder,
        status = 'running', claimed = EXCLUDED.claimed, heartbeat = EXCLUDED.heartbeat,
        ended = NULL, error = NULL
    WHERE i.status <> 'running' OR i.run_id = EXCLUDED.run_id
       OR NOT EXISTS (SELECT 1 FROM crontabber_run AS r
                      WHERE r.run_id = i.run_id AND r.status = 'running')
       OR i.heartbeat < clock_timestamp() - make_interval(secs => COALESCE(
              (SELECT r.lease_seconds FROM crontabber_run AS r WHERE r.run_id = i.run_id),
              p_lease_seconds))
    RETURNING i.run_id INTO taken;
    RETURN taken;
END $$;

-- The record of the run holding p_app_name's marker, abandoned (its holder died), written by
-- an operator's release or reset before the marker goes (the operator functions' callers).
CREATE OR REPLACE FUNCTION crontabber_log_abandoned(
    p_app_name text, p_exc_type text, p_exc_value text
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    UPDATE crontabber_run SET status = 'abandoned', ended = clock_timestamp(),
                              error = p_exc_value
    WHERE run_id = (SELECT run_id FROM crontabber
                    WHERE app_name = p_app_name AND ongoing IS NOT NULL)
      AND status = 'running';
    INSERT INTO crontabber_log (app_name, log_time, duration, exc_type, exc_value,
                                exc_traceback, run_id, host, pid)
    SELECT app_name, clock_timestamp(), COALESCE(heartbeat, ongoing) - ongoing, p_exc_type,
           p_exc_value, '', run_id, substring(ongoing_by from '^(.*):[0-9]+$'),
           substring(ongoing_by from ':([0-9]+)$')::integer
    FROM crontabber
    WHERE app_name = p_app_name AND ongoing IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM crontabber_log AS log
                      WHERE log.app_name = p_app_name AND log.run_id = crontabber.run_id
                        AND log.exc_type = p_exc_type);
END $$;

REVOKE ALL ON FUNCTION crontabber_sweep_lanes(text, double precision),
    crontabber_abandon_expired_lanes(text, bigint, text, double precision),
    crontabber_abandon_run(bigint, text, double precision),
    crontabber_claim_interval(text, timestamptz, bigint, text, text, double precision),
    crontabber_log_abandoned(text, text, text)
FROM PUBLIC;

-- The grants to the three roles, on the tables the owner has in this schema (the jobs' too:
-- sql/jobs/schema.sql calls it again). Idempotent; a role that does not exist is skipped
-- (its name returned as such). Run it again after creating the roles by hand
-- (docs/deploy.md#roles).
CREATE OR REPLACE FUNCTION crontabber_grant_rights() RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    -- written only through the operator functions, or column by column
    control constant text[] := ARRAY['crontabber', 'crontabber_host', 'crontabber_mute',
                                     'crontabber_audit', 'crontabber_audit_head',
                                     'schema_migrations'];
    -- written, never deleted (the retention job deletes through its functions); the log's
    -- rows are never changed either (migration 0031)
    ledger constant text[] := ARRAY['crontabber_log', 'crontabber_run'];
    operator_functions constant text[] := ARRAY[
        'crontabber_pause(text, text[], timestamptz, boolean, json)',
        'crontabber_resume(text, json)', 'crontabber_release(text, json)',
        'crontabber_reset(text, json)', 'crontabber_mark_success(text, timestamptz, timestamptz, json)',
        'crontabber_mute(text, timestamptz, boolean, json)', 'crontabber_unmute(text, json)',
        'crontabber_drain(text, timestamptz, json)', 'crontabber_undrain(text, json)',
        'crontabber_log_abandoned(text, text, text)'];
    -- a run's writes to the state row (migration 0031)
    run_functions constant text[] := ARRAY[
        'crontabber_lock_state(text, text)',
        'crontabber_claim_next(text[], jsonb, text, integer, text, text[], double precision)',
        'crontabber_claim(text, text, text[], timestamptz, text, text, integer, text[], '
            'double precision, text, text)',
        'crontabber_heartbeat(text, bigint, text, bigint)',
        'crontabber_unit(text, bigint, timestamptz)',
        'crontabber_finish(text, bigint, timestamptz, timestamptz, boolean, boolean, json, '
            'text[])',
        'crontabber_finish_ordinary(text, bigint, text, integer, timestamptz, interval, text, '
            'jsonb, timestamptz, timestamptz, boolean, json, text[], text, text, text, bigint)',
        'crontabber_reschedule(text, timestamptz, timestamptz)',
        'crontabber_notices_claim(text, double precision, integer, text[], bigint[])',
        'crontabber_notice_sent(bigint, text)',
        'crontabber_notice_failed(bigint, text, text, double precision, integer)',
        'crontabber_sweep_lanes(text, double precision)',
        'crontabber_abandon_expired_lanes(text, bigint, text, double precision)',
        'crontabber_abandon_run(bigint, text, double precision)',
        'crontabber_claim_interval(text, timestamptz, bigint, text, text, double precision)'];
    done text[] := '{}';
    role text;
    t text;
    f text;
BEGIN
    IF to_regrole('crontabber_readonly') IS NOT NULL THEN
        FOR t IN SELECT c.oid::regclass::text FROM pg_class AS c
                 WHERE c.relnamespace = to_regnamespace(current_schema()) AND c.relkind IN ('r', 'p')
                   AND c.relowner = to_regrole(current_user) LOOP
            EXECUTE format('GRANT SELECT ON %s TO crontabber_readonly', t);
        END LOOP;
        done := done || 'crontabber_readonly'::text;
    END IF;
    FOREACH role IN ARRAY ARRAY['crontabber_runner', 'crontabber_operator'] LOOP
        CONTINUE WHEN to_regrole(role) IS NULL;
        FOR t IN SELECT c.oid::regclass::text FROM pg_class AS c
                 WHERE c.relnamespace = to_regnamespace(current_schema()) AND c.relkind IN ('r', 'p', 'S')
                   AND c.relowner = to_regrole(current_user) LOOP
            IF (SELECT relkind FROM pg_class WHERE oid = t::regclass) = 'S' THEN
                EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE %s TO %I', t, role);
            ELSIF t = ANY(control) THEN
                EXECUTE format('GRANT SELECT ON %s TO %I', t, role);
                EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON %s FROM %I', t, role);
            ELSIF t = 'crontabber_notice' THEN
                -- claimed, sent and failed through the notice functions (migration 0031)
                EXECUTE format('GRANT SELECT, INSERT ON %s TO %I', t, role);
                EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON %s FROM %I', t, role);
            ELSIF t = 'crontabber_log' THEN
                EXECUTE format('GRANT SELECT, INSERT ON %s TO %I', t, role);
                EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON %s FROM %I', t, role);
            ELSIF t = ANY(ledger) THEN
                EXECUTE format('GRANT SELECT, INSERT, UPDATE ON %s TO %I', t, role);
                EXECUTE format('REVOKE DELETE, TRUNCATE ON %s FROM %I', t, role);
            ELSE
                EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %I', t, role);
            END IF;
        END LOOP;
        -- what a tick writes of the mixed tables: a new job's row (its run columns change only
        -- through the run functions of migration 0031: no UPDATE, no DELETE), its host's
        -- record (not a drain), audit rows of runs (id, time, database user and hashes are
        -- the trigger's)
        EXECUTE format('GRANT INSERT (app_name, error_count, depends_on, last_error) '
                       'ON crontabber TO %I', role);
        EXECUTE format('GRANT INSERT (host, version, last_tick, skew_seconds, pid, schema_behind, tags, '
                       'serve_seconds), '
                       'UPDATE (version, last_tick, skew_seconds, pid, schema_behind, tags, '
                       'serve_seconds) '
                       'ON crontabber_host TO %I', role);
        EXECUTE format('GRANT INSERT (actor, action, app_name, reason, detail) ON crontabber_audit TO %I', role);
        EXECUTE format('GRANT EXECUTE ON FUNCTION '
                       'crontabber_breach_pause(text, text[], timestamptz, bigint, json), '
                       'crontabber_prune_log(integer, integer), '
                       'crontabber_prune_runs(integer, integer) TO %I', role);
        FOREACH f IN ARRAY run_functions LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f, role);
        END LOOP;
        done := done || role;
    END LOOP;
    IF to_regrole('crontabber_operator') IS NOT NULL THEN
        FOREACH f IN ARRAY operator_functions LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO crontabber_operator', f);
        END LOOP;
    END IF;
    RETURN done;
END $$;
REVOKE ALL ON FUNCTION crontabber_grant_rights() FROM PUBLIC;

-- The roles, when the owner may create them (a superuser, or CREATEROLE); otherwise a DBA
-- creates them (docs/deploy.md#roles) and runs SELECT crontabber_grant_rights() as the owner.
-- Roles are the cluster's: databases migrating at once race to create them (the loser's
-- CREATE fails with duplicate_object or unique_violation: the role is there, which is all
-- it wanted).
DO $$
DECLARE
    role text;
BEGIN
    FOREACH role IN ARRAY ARRAY['crontabber_runner', 'crontabber_operator', 'crontabber_readonly'] LOOP
        CONTINUE WHEN to_regrole(role) IS NOT NULL;
        IF NOT (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user) THEN
            RAISE NOTICE 'role % does not exist and % may not create it (docs/deploy.md#roles)',
                role, current_user;
            CONTINUE;
        END IF;
        BEGIN
            EXECUTE format('CREATE ROLE %I NOLOGIN', role);
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END LOOP;
END $$;
SELECT crontabber_grant_rights();
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
