-- 0030: the runner login loses two of the rights the third security review's N-1 found it
-- misusing (issue #43 item 1, its first part; docs/deploy.md#roles says what it keeps).
--
-- 1. crontabber_breach_pause judges the stored run itself and writes its own audit row. It
--    paused any job after a `succeeded` row the caller had just inserted, under the actor and
--    reason the caller named. Now the run must be the job's latest finished scheduled run,
--    succeeded, with a breach recorded by the tick that judged it, and the run the job's state
--    row last recorded (what the run's own finish writes: last_run = its start, and its run
--    id with no marker, or a later claim's still running), claimed by the calling database
--    user (crontabber_run.db_user, new: a trigger's); the actor ('crontabber'), the
--    reason (the run, its duration, the rules it breached, its metrics) and the detail are the
--    function's.
--    The signature stays: the release before this one calls it as it did (its actor, reason
--    and until are ignored; a breach pause lasts until someone resumes it, as that release's).
-- 2. Neither the runner nor the operator role may DELETE the run log (crontabber_log) or the
--    run ledger (crontabber_run): the only code that deletes there, the retention job
--    (jobs/runlog.py, prune-run-log), deletes through crontabber_prune_log and
--    crontabber_prune_runs, which keep the last 7 days whoever asks.
--
-- Not expand only: the release before this one's prune-run-log job, run as a runner login,
-- is refused (permission denied) until its host runs this release; its ticks run as before.

-- The database user that wrote each run's ledger row (its claim): the trigger's, whatever the
-- writer sends, and kept by any later UPDATE of it (owner included), so a breach pause can ask
-- for a run of the calling user. NULL: a run recorded before migration 0030.
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

-- on_breach = pause (crontabber/alerts/checks.py): the runner's one way to pause a job, and
-- only after the job's latest run breached a check, as the stored run shows (p_depends_on,
-- p_until and p_audit: the caller's, ignored since migration 0030).
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
ALTER FUNCTION crontabber_breach_pause(text, text[], timestamptz, bigint, json) SET lock_timeout = '5s';

-- The retention job's deletes (jobs/runlog.py): one batch of the rows older than p_keep_days,
-- never fewer than 7 days (the last week stays whoever asks); the number of rows deleted.
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

CREATE OR REPLACE FUNCTION crontabber_grant_rights() RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    -- written only through the operator functions, or column by column
    control constant text[] := ARRAY['crontabber', 'crontabber_host', 'crontabber_mute',
                                     'crontabber_audit', 'crontabber_audit_head',
                                     'schema_migrations'];
    -- written, never deleted (the retention job deletes through its functions)
    ledger constant text[] := ARRAY['crontabber_log', 'crontabber_run'];
    operator_functions constant text[] := ARRAY[
        'crontabber_pause(text, text[], timestamptz, boolean, json)',
        'crontabber_resume(text, json)', 'crontabber_release(text, json)',
        'crontabber_reset(text, json)', 'crontabber_mark_success(text, timestamptz, timestamptz, json)',
        'crontabber_mute(text, timestamptz, boolean, json)', 'crontabber_unmute(text, json)',
        'crontabber_drain(text, timestamptz, json)', 'crontabber_undrain(text, json)'];
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
            ELSIF t = ANY(ledger) THEN
                EXECUTE format('GRANT SELECT, INSERT, UPDATE ON %s TO %I', t, role);
                EXECUTE format('REVOKE DELETE, TRUNCATE ON %s FROM %I', t, role);
            ELSE
                EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %I', t, role);
            END IF;
        END LOOP;
        -- what a tick writes of the mixed tables: its runs' columns of a job's row (not the
        -- pause, the mark; not a DELETE: a reset), its host's record (not a drain), audit rows
        -- of runs (id, time, database user and hashes are the trigger's)
        EXECUTE format('GRANT INSERT (app_name, error_count, depends_on, last_error), '
                       'UPDATE (next_run, first_run, last_run, last_success, ongoing, ongoing_by, '
                       'error_count, depends_on, last_error, run_id, heartbeat) ON crontabber TO %I', role);
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

SELECT crontabber_grant_rights();
