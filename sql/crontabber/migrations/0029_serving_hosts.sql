-- 0029: a runner that serves (issue #45 item 2): crontabber_host.serve_seconds, a server's
-- tick_seconds (NULL: a cron tick's host), so that a serving host that stopped ticking reads as
-- gone within its tick and a lease. Expand only: the release before this one never writes it
-- (its hosts read as cron ticks' hosts). The runner role may write the column: the grants are
-- given again.
ALTER TABLE crontabber_host ADD COLUMN IF NOT EXISTS serve_seconds real;

CREATE OR REPLACE FUNCTION crontabber_grant_rights() RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    -- written only through the operator functions, or column by column
    control constant text[] := ARRAY['crontabber', 'crontabber_host', 'crontabber_mute',
                                     'crontabber_audit', 'crontabber_audit_head',
                                     'schema_migrations'];
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
                       'crontabber_breach_pause(text, text[], timestamptz, bigint, json) TO %I', role);
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
