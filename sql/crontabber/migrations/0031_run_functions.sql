-- 0031: a run's writes to the state row go through functions keyed on its run id, and the
-- runner and operator logins lose every UPDATE of `crontabber` (issue #43 item 1, N-1, its
-- second part; docs/deploy.md#roles says what each login keeps).
--
-- Before: the runner role had column UPDATEs on the run columns of every job's row, so a
-- runner login could stop any job without a trace (next_run = 'infinity'), make a failing one
-- look healthy (last_success, error_count, last_error) or kill a live run (ongoing = NULL). Now
-- each transition of a run is a SECURITY DEFINER function whose rule is the database's:
--
--   crontabber_lock_state      lock a job's row (FOR UPDATE NOWAIT) and read it (the claim by
--                              name; an operator's change)
--   crontabber_claim_next      a pass's claim of its next due job (claim_next_due)
--   crontabber_claim           claim a locked job: only when it is due (a scheduled run) or
--                              forced, and, when another run holds it, only when that run's
--                              lease expired (its own lease, stored at its claim: never the
--                              caller's), or its holder named this host under this login (the
--                              host saw its process gone); the run taken over is recorded
--                              abandoned by the function
--   crontabber_heartbeat       renew the lease of a run the caller's login claimed
--   crontabber_unit            a successful unit's progress (last_success) of such a run
--   crontabber_finish[_ordinary]  the end of such a run
--   crontabber_reschedule      a schedule change's next run, only while no run holds the job
--
-- The notices (crontabber_notices_claim, crontabber_notice_sent, crontabber_notice_failed: by
-- the login that claimed them), the run ledger and the intervals (a guard trigger: a login
-- changes only the runs it claimed; what one run records of another, through
-- crontabber_sweep_lanes, crontabber_abandon_expired_lanes, crontabber_abandon_run,
-- crontabber_claim_interval and the operator's crontabber_log_abandoned, judged by that run's
-- own lease) follow the same rule; the logins lose UPDATE of crontabber_log and
-- crontabber_notice.
--
-- "Such a run": the run holds the job's marker (its run id, ongoing set) and its ledger row
-- was written by the calling database user (crontabber_run.db_user, the trigger's since 0030).
-- A runner login may still claim a due job (or force one: --job NAME --force) and end its own
-- run with any next run; --nagios and the dashboard flag a next run later than the job's schedule
-- allows (crontabber.nagios), and every such run is in the ledger under its login.
--
-- contract: the runner and operator logins' UPDATE of crontabber, crontabber_log and
-- crontabber_notice, which the release before this one used (its runs' claims and ends).
-- Not expand only: a host on the release before this one, with a runner login, cannot claim
-- or end a run once this migration is applied (its UPDATEs are refused); it refuses to claim
-- anyway (its code is older than the schema: exit 8, the old-code alert), and a run it had in
-- flight is taken over once its lease expires.

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

SELECT crontabber_grant_rights();
