-- 0027: pauses that only their owner ends, and drains too; breaches left out of the baseline
-- (issue #42 items 1, 5, 6 and 9). --resume all ended every pause,
-- another operator's incident pause and an on_breach pause included. A pause now records its
-- scope ('all': made by --pause all; 'breach': on_breach = pause; NULL: a job's own) and a resume of
-- scope 'all' ends only pauses of that scope. Expand only: the release before this one never
-- reads the column (its --resume all, run against this schema, ends only --pause all's).
ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS paused_scope text;
-- A breach does not become the new normal (issue #42 item 9): the rules a run breached.
ALTER TABLE crontabber_run ADD COLUMN IF NOT EXISTS breach text;
-- A killed rerun reads as what it was (issue #42 item 2): a tick records it abandoned.
-- The running runs (a tick sweeps the rerun runs killed without recording their end).
CREATE INDEX IF NOT EXISTS crontabber_run_running_idx ON crontabber_run (kind, heartbeat)
    WHERE status = 'running';

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

-- --drain replaces a drain in force only with --replace, as --pause and --mute do.
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

-- A breach pause records its scope ('breach'), so that --nagios can warn of it.
CREATE OR REPLACE FUNCTION crontabber_breach_pause(
    p_app_name text, p_depends_on text[], p_until timestamptz, p_run_id bigint, p_audit json
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM crontabber_run
                   WHERE run_id = p_run_id AND app_name = p_app_name AND status = 'succeeded') THEN
        RAISE EXCEPTION 'no succeeded run % of % to pause it for', p_run_id, p_app_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- its scope is 'breach' whatever the caller says (--nagios warns of it; --resume all keeps it)
    RETURN crontabber_pause(
        p_app_name, p_depends_on, p_until, false,
        json_build_object('actor', p_audit -> 'actor', 'reason', p_audit -> 'reason',
                          'detail', COALESCE((p_audit -> 'detail')::jsonb, '{}')
                                    || '{"scope": "breach"}'::jsonb));
END $$;
