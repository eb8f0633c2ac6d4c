-- Runtime queries of the runner's state store (crontabber/store.py).
-- Each block starts with "-- name: NAME"; parameters are psycopg2 %(name)s.

-- name: clock
-- The database's clock: every host agrees on it, whatever its own clock says.
SELECT clock_timestamp() AS now;

-- name: tick_states
-- The tick's host record, the fleet as placement sees it and the state rows in one statement
-- (an idle tick stays at two statements: the clock, timed by the host to measure its clock's
-- skew, then this): one row per job, each with the fleet (a JSON array of
-- [host, tags, live, drained]; this host's as just recorded), and one row without app_name
-- when there is no job row. The insert runs whether or not it is read; it leaves an
-- operator's drain alone. Sent as one query string outside psycopg2's transaction: one
-- implicit transaction, one round trip. The host record may be lost in a crash without
-- harm: no fsync wait (SET LOCAL holds in the implicit transaction block).
-- lanes: the rerun runs killed without recording their end (no heartbeat for lease_seconds;
-- 0: not swept) are recorded abandoned by whichever tick comes next (an index on the running
-- runs keeps it cheap), as a scheduled run's marker is taken over.
SET LOCAL synchronous_commit = off;
WITH lanes AS (  -- crontabber_sweep_lanes (migration 0031): each run judged by its own lease,
    -- called only when a rerun run is past this tick's lease (an idle tick calls no function:
    -- compiling one costs a new session ~300 catalog rows)
    SELECT crontabber_sweep_lanes(%(host)s, %(lease_seconds)s) AS swept
    WHERE %(lease_seconds)s > 0
      AND EXISTS (SELECT 1 FROM crontabber_run AS r
                  WHERE r.status = 'running' AND r.kind = 'rerun'
                    AND COALESCE(r.heartbeat, r.started)
                        < %(now)s - make_interval(secs => %(lease_seconds)s))
), tick AS (
    INSERT INTO crontabber_host (host, version, last_tick, skew_seconds, pid, schema_behind, tags,
                                 serve_seconds)
    VALUES (%(host)s, %(version)s, %(now)s, %(skew)s, %(pid)s, %(behind)s::integer[],
            %(tags)s::text[], %(serve_seconds)s)
    ON CONFLICT (host) DO UPDATE
    SET version = EXCLUDED.version, last_tick = EXCLUDED.last_tick,
        skew_seconds = EXCLUDED.skew_seconds, pid = EXCLUDED.pid,
        schema_behind = EXCLUDED.schema_behind, tags = EXCLUDED.tags,
        serve_seconds = EXCLUDED.serve_seconds
    RETURNING host, tags, last_tick, drained_at, drain_until
), fleet AS (
    SELECT json_agg(json_build_array(
               h.host, COALESCE(h.tags, '{}'),
               h.last_tick > %(now)s - make_interval(secs => %(live_seconds)s),
               h.drained_at IS NOT NULL AND (h.drain_until IS NULL OR h.drain_until > %(now)s))
           ) AS fleet
    FROM (SELECT host, tags, last_tick, drained_at, drain_until FROM tick
          UNION ALL
          SELECT host, tags, last_tick, drained_at, drain_until FROM crontabber_host
          WHERE host <> %(host)s) AS h
)
SELECT fleet.fleet, c.app_name, c.next_run, c.first_run, c.last_run, c.last_success, c.ongoing,
       c.ongoing_by, c.error_count, c.depends_on, c.last_error, c.run_id, c.heartbeat,
       c.paused_until, c.paused_reason, c.paused_by, c.paused_scope,
       c.success_marked_at, c.success_marked_by, c.success_marked_reason
FROM fleet LEFT JOIN lanes ON true LEFT JOIN crontabber AS c ON true;

-- name: fleet
-- The fleet as placement sees it (--explain): each host's tags, whether it ticked within
-- live_seconds, whether it is drained.
SELECT host, COALESCE(tags, '{}') AS tags,
       last_tick > clock_timestamp() - make_interval(secs => %(live_seconds)s) AS live,
       drained_at IS NOT NULL AND (drain_until IS NULL OR drain_until > clock_timestamp())
           AS drained
FROM crontabber_host
ORDER BY host;

-- name: drain
-- An operator drains a host that ticked: it claims nothing new until %(until)s (NULL: until
-- --undrain); whether it was drained already (NULL: no such host, nothing written). Audited
-- by the function (migration 0025), as every operator action below.
SELECT crontabber_drain(%(host)s, %(until)s, %(audit)s::json) AS was_drained;

-- name: undrain
-- The drain ends now; false: the host was not drained (nothing audited).
SELECT crontabber_undrain(%(host)s, %(audit)s::json) AS undrained;

-- name: hosts
-- drained: an operator's drain in force (migration 0021).
SELECT host, version, last_tick, skew_seconds, pid, schema_behind, tags, drain_until,
       drained_by, drain_reason, serve_seconds,
       drained_at IS NOT NULL AND (drain_until IS NULL OR drain_until > clock_timestamp())
           AS drained
FROM crontabber_host
ORDER BY host;

-- name: last_metrics
-- The metrics file: each job's newest succeeded run that returned metrics, with them.
SELECT DISTINCT ON (app_name) app_name, run_id, metrics
FROM crontabber_run
WHERE app_name = ANY(%(app_names)s) AND status = 'succeeded' AND metrics IS NOT NULL
ORDER BY app_name, run_id DESC;

-- name: last_durations
-- Each job's last run: the summed durations of the log rows of its latest run id
-- (a backfill run logs one row per interval); a row without run id (crontabber
-- 0.18's) alone.
WITH latest AS (
    SELECT DISTINCT ON (app_name) app_name, run_id, duration
    FROM crontabber_log
    WHERE app_name = ANY(%(app_names)s)
    ORDER BY app_name, id DESC
)
SELECT latest.app_name,
       CASE WHEN latest.run_id IS NULL THEN latest.duration
            ELSE (SELECT sum(log.duration) FROM crontabber_log AS log
                  WHERE log.app_name = latest.app_name AND log.run_id = latest.run_id)
       END AS duration
FROM latest;

-- name: all_states
SELECT app_name, next_run, first_run, last_run, last_success, ongoing, ongoing_by,
       error_count, depends_on, last_error, run_id, heartbeat,
       paused_until, paused_reason, paused_by, paused_scope,
       success_marked_at, success_marked_by, success_marked_reason
FROM crontabber;

-- name: get_state
SELECT app_name, next_run, first_run, last_run, last_success, ongoing, ongoing_by,
       error_count, depends_on, last_error, run_id, heartbeat,
       paused_until, paused_reason, paused_by, paused_scope,
       success_marked_at, success_marked_by, success_marked_reason
FROM crontabber
WHERE app_name = %(app_name)s;

-- name: insert_skeleton
-- The row a job's first attempt locks; a concurrent first insert waits on the
-- unique index and then does nothing, so both runners go on to lock one row.
INSERT INTO crontabber (app_name, error_count, depends_on, last_error)
VALUES (%(app_name)s, 0, %(depends_on)s, '{}')
ON CONFLICT (app_name) DO NOTHING;

-- name: lock_state
-- drained: whether the claiming host (%(host)s; NULL: an operator's change) is drained now,
-- checked under the row lock, so a tick that began before a --drain claims nothing after it.
-- (crontabber_lock_state, migration 0031: the logins have no UPDATE of the table to lock with.)
SELECT * FROM crontabber_lock_state(%(app_name)s, %(host)s);

-- name: claim_next_due
-- A scheduled pass's claim of the first job of %(names)s (in that order) whose row is still due
-- (next_run NULL or passed: it never ran, or no runner has run it since the pass read it) and
-- that no other transaction holds (SKIP LOCKED): the rows other runners took meanwhile are passed
-- over in the same statement, never tried one transaction each, so a pass's claims do not grow
-- with the number of hosts. A row without a marker is claimed at once, in the same statement, as
-- mark_ongoing does (a new run id, the first heartbeat, the ledger's row; its parents from
-- %(depends)s, a JSON object of each candidate's): the runner's rule could only say yes. A row
-- with a marker comes back locked and unclaimed (claimed_run_id NULL) for the runner to judge
-- (live elsewhere: passed over; expired or dead: taken over, mark_ongoing), as one whose host is
-- drained (drained: checked under the row lock, so a tick that began before a --drain claims
-- nothing after it). No row: every candidate was taken.
-- Each candidate's row is read by its own index lookup (the LATERAL subquery, kept apart by
-- OFFSET 0): a claim reads at most 16 rows whatever the number of jobs (a plain
-- `app_name = ANY(...)` is planned as a scan of the whole table once it is small).
-- The statement is crontabber_claim_next's (migration 0031), which writes the claimer's lease
-- (%(lease_seconds)s) in the ledger: a takeover waits for it.
SELECT * FROM crontabber_claim_next(%(names)s::text[], %(depends)s::jsonb, %(host)s, %(pid)s,
                                    %(holder)s, %(options)s::text[], %(lease_seconds)s);

-- name: mark_ongoing
-- The claim: a new run id from the sequence (the run's fencing token) and the
-- first heartbeat, set with the marker under the row lock; the run's ledger row
-- (status running) in the same statement.
-- A marker found (a takeover the runner's rule allowed) is recorded abandoned by the function
-- (%(exc_type)s, %(exc_value)s), which refuses to take over a live run (crontabber_claim,
-- migration 0031).
SELECT crontabber_claim(%(app_name)s, %(kind)s, %(depends_on)s::text[], %(now)s, %(holder)s,
                        %(host)s, %(pid)s, %(options)s::text[], %(lease_seconds)s,
                        %(exc_type)s, %(exc_value)s) AS run_id;

-- name: heartbeat
-- Renew the lease; no row returned means another run holds the job now. The ledger
-- row follows in the same statement, with the output captured so far when it grew
-- (output NULL: unchanged), so a run killed with its host still has its log.
SELECT * FROM crontabber_heartbeat(%(app_name)s, %(run_id)s, %(output)s, %(dropped)s);

-- name: record_success
-- Progress after each successful unit (each backfill interval), so a kill
-- mid-backfill never redoes finished intervals. Fenced: only the run holding
-- the marker writes.
-- GREATEST: a --rerun of past days never moves last_success backwards.
SELECT app_name FROM (SELECT %(app_name)s::text AS app_name) AS unit
WHERE crontabber_unit(%(app_name)s, %(run_id)s, %(success)s);

-- name: log_success
-- A unit's log row (with the job's one-line summary of it) and the run's progress in
-- the ledger: how many intervals, which, the newest summary and metrics (a backfill run's are
-- its last interval's, as its summary).
WITH progress AS (
    UPDATE crontabber_run
    SET intervals = intervals + 1,
        first_interval = LEAST(first_interval, %(success)s),
        last_interval = GREATEST(last_interval, %(success)s),
        summary = COALESCE(%(summary)s, summary),
        metrics = COALESCE(%(metrics)s::jsonb, metrics)
    WHERE run_id = %(run_id)s
)
INSERT INTO crontabber_log (app_name, duration, success, run_id, host, pid, summary)
VALUES (%(app_name)s, %(duration)s, %(success)s, %(run_id)s, %(host)s, %(pid)s, %(summary)s);

-- name: log_failure
INSERT INTO crontabber_log (app_name, duration, exc_type, exc_value, exc_traceback,
                            run_id, host, pid)
VALUES (%(app_name)s, %(duration)s, %(exc_type)s, %(exc_value)s, %(exc_traceback)s,
        %(run_id)s, %(host)s, %(pid)s);

-- name: log_abandoned
-- The record of a run whose holder died without recording its end (kill -9, a lost host),
-- written under the row lock by whoever takes the job over, releases it or resets it, before
-- the marker goes: a failed attempt in crontabber's log (exc_type RunAbandoned) with the dead
-- run's id, host and pid, its duration up to its last heartbeat, and who found it. Once per run.
-- (crontabber_log_abandoned, migration 0031: the operator's; a takeover's is crontabber_claim's)
SELECT crontabber_log_abandoned(%(app_name)s, %(exc_type)s, %(exc_value)s);

-- name: log_runs
-- --history: the log rows of the job's newest %(runs)s runs, newest run first
-- and, within a run, newest row first. A run is its run id; a row without one
-- (written before migration 0005, or by crontabber 0.18) is a run by itself.
-- %(runs)s + 1 runs are read so the caller can tell whether older ones exist.
WITH runs AS (
    SELECT COALESCE(run_id, -id) AS run_key, max(id) AS newest
    FROM crontabber_log
    WHERE app_name = %(app_name)s
    GROUP BY 1
    ORDER BY newest DESC
    LIMIT %(runs)s + 1
)
SELECT log.id, log.app_name, log.log_time, log.duration, log.success, log.exc_type,
       log.exc_value, log.exc_traceback, log.run_id, log.host, log.pid, log.summary
FROM crontabber_log AS log
JOIN runs ON COALESCE(log.run_id, -log.id) = runs.run_key
WHERE log.app_name = %(app_name)s
ORDER BY runs.newest DESC, log.id DESC;

-- name: run_log
-- --show-error --run ID: every row of one run, oldest first.
SELECT id, app_name, log_time, duration, success, exc_type, exc_value, exc_traceback,
       run_id, host, pid, summary
FROM crontabber_log
WHERE app_name = %(app_name)s AND run_id = %(run_id)s
ORDER BY id;

-- name: last_failure
-- --show-error: the job's newest failed (or fenced-off) attempt.
SELECT id, app_name, log_time, duration, success, exc_type, exc_value, exc_traceback,
       run_id, host, pid, summary
FROM crontabber_log
WHERE app_name = %(app_name)s AND exc_type IS NOT NULL
ORDER BY id DESC
LIMIT 1;

-- name: end_run
-- The run's end in the ledger, written by the run itself whether or not it still held
-- the job (a run fenced off says so); a run already found abandoned that comes back
-- (it was frozen) becomes fenced off. The summary is the last unit's, written with it
-- (log_success).
UPDATE crontabber_run
SET ended = clock_timestamp(), status = %(status)s,
    error = %(error)s, output = %(output)s, output_dropped = %(dropped)s
WHERE run_id = %(run_id)s AND status IN ('running', 'abandoned');

-- name: last_errors
-- The failing jobs' newest failure in one plain line, from the run ledger (the line naming the
-- service and its address: crontabber.failures.describe), where crontabber's last_error holds
-- the exception's type and raw message.
SELECT DISTINCT ON (app_name) app_name, error
FROM crontabber_run
WHERE app_name = ANY(%(app_names)s) AND error IS NOT NULL AND status <> 'succeeded'
ORDER BY app_name, run_id DESC;

-- name: mark_breach
-- The checks run %(run_id)s of the job breached (crontabber.alerts.checks): it is left out of
-- the baseline of later runs, and --history shows it "ok, breach".
UPDATE crontabber_run SET breach = %(breach)s
WHERE run_id = %(run_id)s AND app_name = %(app_name)s;

-- name: run_records
-- Ledger rows of a job, newest first: the runs run_ids (NULL: any), at most "limit" (NULL: no
-- limit), with their captured output only when with_output (--history reads many runs
-- without it; --logs, --show-error and the dashboard one run with it).
SELECT run_id, app_name, kind, host, pid, started, heartbeat, ended, status, intervals,
       first_interval, last_interval, summary, error, octet_length(output) AS output_bytes,
       output_dropped, CASE WHEN %(with_output)s THEN output ELSE '' END AS output, options,
       metrics, breach
FROM crontabber_run
WHERE app_name = %(app_name)s AND (%(run_ids)s::bigint[] IS NULL OR run_id = ANY(%(run_ids)s))
ORDER BY run_id DESC
LIMIT %(limit)s;

-- name: finish_ordinary
-- An ordinary job's run that succeeded, ended in one statement (the common case of
-- crontabber.store.StateStore.finish): its one unit when it has one (%(success)s; NULL: none),
-- the end on the state row, the unit's log row, and the ledger's progress and end together,
-- all only while the run holds the marker. No row returned: it no longer does, and nothing
-- was written (the caller then takes the general path, which says how). An ordinary run holds
-- no interval (crontabber_interval is a backfill run's), so none is ended.
SELECT * FROM crontabber_finish_ordinary(
    %(app_name)s, %(run_id)s, %(host)s, %(pid)s, %(success)s, %(duration)s, %(summary)s,
    %(metrics)s::jsonb, %(started)s, %(next_run)s, %(keeps_health)s, %(last_error)s::json,
    %(depends_on)s::text[], %(status)s, %(error)s, %(output)s, %(dropped)s);

-- name: finish
-- The end of an attempt, written only by the run that holds the marker: a run
-- that lost its lease (another runner took the job over) changes nothing.
-- run_id stays as the last run's; the heartbeat goes with the marker.
-- %(keeps_health)s (a --rerun, or a run stopped by SIGTERM: crontabber.state.FinishRecord)
-- leaves the job's health alone; a stopped run's job stays due.
SELECT * FROM crontabber_finish(%(app_name)s, %(run_id)s, %(started)s, %(next_run)s,
                                %(succeeded)s, %(keeps_health)s, %(last_error)s::json,
                                %(depends_on)s::text[]);

-- name: release
-- An operator clears a dead or expired marker; last run, last success and the
-- backfill anchor stay. run_id goes too, so the dead run is fenced off. A first run
-- that died has no next_run: the release makes it due now, so the next tick runs it
-- and lateness (--nagios, the list) counts from the release.
SELECT crontabber_release(%(app_name)s, %(audit)s::json);

-- name: delete_state
SELECT crontabber_reset(%(app_name)s, %(audit)s::json);

-- name: pause
-- Insert the row if the job never ran, so a new job can be paused before its first tick.
-- A pause still in force is replaced only when asked (--replace): false otherwise, and the
-- caller names the pause that stays. One statement, so two operators pausing at once cannot
-- both replace nothing. No until (NULL): 'infinity', a pause that lasts until someone
-- resumes it (on_breach = pause).
SELECT crontabber_pause(%(app_name)s, %(depends_on)s, %(until)s, %(replace)s, %(audit)s::json)
       AS paused;

-- name: breach_pause
-- on_breach = pause: the pause a tick makes after run %(run_id)s of the job breached a check
-- (never replacing a pause in force); the runner's role may make this one only. The function
-- judges the stored run and writes its own actor and reason (migration 0030): %(until)s and
-- %(audit)s are ignored.
SELECT crontabber_breach_pause(%(app_name)s, %(depends_on)s, %(until)s, %(run_id)s,
                               %(audit)s::json) AS paused;

-- name: resume
-- The pause ends now rather than vanishing: lateness (--nagios, --list-jobs) counts from its
-- end, so a job that was due during the pause is not overdue the moment it is resumed;
-- who paused it and why stay for --explain ("a pause ended ...").
SELECT crontabber_resume(%(app_name)s, %(audit)s::json);

-- name: pause_scopes
-- The pauses in force and who may end them: scope 'all' (made by --pause all: --resume all
-- ends it) or NULL (a job's own pause or a breach pause: only --resume NAME ends it).
SELECT app_name, paused_scope AS scope
FROM crontabber
WHERE paused_until > clock_timestamp();

-- name: mark_success
-- Socorro's cronmarksuccess: as if the job had just succeeded (pending backfill
-- intervals up to now are skipped); its next run is one interval away. Recorded as an
-- operator's mark (who, why): the last success is a mark while last_success equals
-- success_marked_at.
SELECT crontabber_mark_success(%(app_name)s, %(now)s, %(next_run)s, %(audit)s::json);

-- name: audit
INSERT INTO crontabber_audit (actor, action, app_name, reason, detail)
VALUES (%(actor)s, %(action)s, %(app_name)s, %(reason)s, %(detail)s)
RETURNING id;

-- name: audit_list
-- db_user: the database user that wrote the row (migration 0025; NULL before it); changed:
-- its hash is not that of its columns (someone changed it after it was written).
SELECT id, at, actor, db_user, action, app_name, reason, detail,
       row_hash IS DISTINCT FROM crontabber_audit_hash(crontabber_audit) AS changed
FROM crontabber_audit
WHERE %(app_name)s::text IS NULL OR app_name = %(app_name)s
ORDER BY id DESC
LIMIT %(limit)s;

-- name: audit_verify
-- --verify-audit, every break in one pass: each row (by id) whose hash is not that of its
-- columns (changed), or whose prev_hash is not the row before's (rows before it are missing:
-- before is the id of the row now before it); with each, the number of rows and the newest
-- row and the head's (the newest row ever written: differing, rows after the newest were
-- deleted). A whole chain gives one row without a bad id. One snapshot.
WITH chain AS (
    SELECT a.id,
           a.row_hash IS DISTINCT FROM crontabber_audit_hash(a) AS changed,
           a.prev_hash IS DISTINCT FROM lag(a.row_hash) OVER (ORDER BY a.id) AS unlinked,
           lag(a.id) OVER (ORDER BY a.id) AS before
    FROM crontabber_audit AS a
), newest AS (
    SELECT id, row_hash FROM crontabber_audit ORDER BY id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM chain) AS rows, bad.id AS bad_id, bad.changed, bad.unlinked,
       bad.before, newest.id AS newest_id, h.last_id AS head_id,
       h.last_id IS DISTINCT FROM newest.id OR h.row_hash IS DISTINCT FROM newest.row_hash
           AS tail_cut
FROM crontabber_audit_head AS h
LEFT JOIN newest ON true
LEFT JOIN LATERAL (SELECT id, changed, unlinked, before FROM chain WHERE changed OR unlinked)
    AS bad ON true
ORDER BY bad.id;

-- name: claim_interval
-- Take one interval of a backfill job for a run, under the row's lock (the upsert's): free
-- when it has never run, its last run of it ended, its holder stopped renewing it for
-- lease_seconds (it died), or its holder's run no longer counts as running (a dead run
-- taken over, recorded abandoned: its interval is free at once, as its marker was). No row
-- returned: another run holds it now (see interval_holder).
-- (crontabber_claim_interval, migration 0031: the holder's own lease decides; the run must be
-- the caller's.)
SELECT run_id
FROM crontabber_claim_interval(%(app_name)s, %(starts)s, %(run_id)s, %(kind)s, %(holder)s,
                               %(lease_seconds)s) AS run_id
WHERE run_id IS NOT NULL;

-- name: interval_holder
SELECT run_id, kind, holder, heartbeat FROM crontabber_interval
WHERE app_name = %(app_name)s AND starts = %(starts)s;

-- name: interval_done
-- A unit's success on its interval row, only by the run holding it (a rerun's fence).
UPDATE crontabber_interval
SET status = 'succeeded', ended = clock_timestamp(), heartbeat = clock_timestamp()
WHERE app_name = %(app_name)s AND starts = %(starts)s AND run_id = %(run_id)s
  AND status = 'running'
RETURNING run_id;

-- name: end_intervals
-- The end of a run on the interval it still held (the one it failed on, or was stopped in).
UPDATE crontabber_interval
SET status = %(status)s, ended = clock_timestamp(), error = %(error)s
WHERE run_id = %(run_id)s AND status = 'running';

-- name: abandon_run
-- A rerun killed without recording its end: found by --resume-run once its lease expired, or
-- at once on its own host, where its process is gone (a run of its group, a tick's claim).
-- A run of another login is recorded only once its own stored lease expired
-- (crontabber_abandon_run, migration 0031); abandoned: whether it was.
SELECT crontabber_abandon_run(%(run_id)s, %(error)s, NULL) AS abandoned;

-- name: lock_holders
-- After a lock wait timed out (migration 0028): the other sessions holding a lock on the
-- tables an operator function locks rows of (a row lock shows as a table lock of its
-- transaction: RowShareLock, RowExclusiveLock). pg_locks is readable by every user;
-- pg_stat_activity shows another user's name, application and pid (not its query).
SELECT DISTINCT a.pid, a.usename, a.application_name, l.relation::regclass::text AS on_table
FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.granted AND l.pid <> pg_backend_pid() AND l.locktype = 'relation'
  AND l.relation IN ('crontabber_audit_head'::regclass, 'crontabber'::regclass,
                     'crontabber_host'::regclass, 'crontabber_mute'::regclass)
  AND l.mode IN ('RowShareLock', 'RowExclusiveLock', 'ShareRowExclusiveLock', 'ExclusiveLock',
                 'AccessExclusiveLock')
ORDER BY a.pid, on_table;
