-- The rerun lane's queries (crontabber/reruns/store.py): a --rerun's runs in the run ledger
-- (crontabber_run: the first run of a rerun group holds its plan; the runs that continue or
-- join it name it in resumed_from), the intervals they pick and what --rerun and --resume-run
-- read to plan. The interval claim, a unit's record and a run's abandonment are the state
-- store's own statements (crontabber.sql: claim_interval, interval_done, log_success,
-- abandon_run), shared with a scheduled backfill's runs.
-- Each block starts with "-- name: NAME"; parameters are psycopg2 %(name)s.

-- name: start_rerun
-- A --rerun's run: its ledger row only. It runs in a lane of its own: it leaves the job's
-- row and marker alone, so the job's scheduled runs go on; each interval is claimed in
-- crontabber_interval before it runs (rerun_intervals, claim_interval). The first run of a
-- rerun holds its plan (its intervals in order), parallel (NULL: one at a time), downstream
-- and downstream_of; a run that joins it or continues it names it (resumed_from), plan NULL.
INSERT INTO crontabber_run (run_id, app_name, kind, host, pid, started, heartbeat, options,
                            plan, resumed_from, parallel, downstream, downstream_of,
                            lease_seconds)
VALUES (nextval('crontabber_run_id_seq'), %(app_name)s, 'rerun', %(host)s, %(pid)s,
        clock_timestamp(), clock_timestamp(), %(options)s::text[], %(plan)s::timestamptz[],
        %(resumed_from)s, %(parallel)s, %(downstream)s, %(downstream_of)s, %(lease_seconds)s)
RETURNING run_id, started;

-- name: lock_rerun
-- The first run of a rerun group, locked: its runs pick their intervals one at a time, and a
-- dependant's rerun is started once (downstream_rerun).
SELECT run_id, COALESCE(parallel, 1) AS parallel FROM crontabber_run WHERE run_id = %(run_id)s FOR UPDATE;

-- name: downstream_rerun
-- The rerun of dependant app_name that rerun root started (--downstream), if any.
SELECT run_id, COALESCE(parallel, 1) AS parallel FROM crontabber_run
WHERE downstream_of = %(root)s AND app_name = %(app_name)s AND resumed_from IS NULL
ORDER BY run_id LIMIT 1;

-- name: rerun_root
-- The first run of the rerun group run_id belongs to (resumed_from, followed up).
WITH RECURSIVE up AS (
    SELECT run_id, resumed_from FROM crontabber_run WHERE run_id = %(run_id)s
    UNION
    SELECT r.run_id, r.resumed_from FROM crontabber_run AS r JOIN up ON r.run_id = up.resumed_from
)
SELECT run_id FROM up WHERE resumed_from IS NULL;

-- name: rerun_group
-- Every run of rerun group root (the first run, the runs that continued or joined it), oldest
-- first, whatever their status (--history --run ID's grouped view), whether a running one's
-- lease expired, and the dependants' reruns it started (--downstream), each by its first run.
WITH RECURSIVE grp AS (
    SELECT run_id FROM crontabber_run WHERE run_id = %(root)s
    UNION
    SELECT r.run_id FROM crontabber_run AS r JOIN grp ON r.resumed_from = grp.run_id
)
SELECT r.run_id, r.app_name, r.host, r.pid, r.status, r.started, r.ended, r.intervals,
       r.status = 'running'
           AND COALESCE(r.heartbeat, r.started)
               < clock_timestamp() - make_interval(secs => %(lease_seconds)s) AS expired,
       false AS dependant
FROM crontabber_run AS r JOIN grp USING (run_id)
UNION ALL
SELECT d.run_id, d.app_name, d.host, d.pid, d.status, d.started, d.ended, d.intervals, false, true
FROM crontabber_run AS d
WHERE d.downstream_of = %(root)s AND d.resumed_from IS NULL
ORDER BY dependant, run_id;

-- name: rerun_workers
-- The runs of rerun group root that the ledger shows running, and whether each one's lease
-- expired.
WITH RECURSIVE grp AS (
    SELECT run_id FROM crontabber_run WHERE run_id = %(root)s
    UNION
    SELECT r.run_id FROM crontabber_run AS r JOIN grp ON r.resumed_from = grp.run_id
)
SELECT r.run_id, r.host || ':' || r.pid AS holder,
       r.heartbeat < clock_timestamp() - make_interval(secs => %(lease_seconds)s) AS expired
FROM crontabber_run AS r JOIN grp USING (run_id)
WHERE r.status = 'running'
ORDER BY r.run_id;

-- name: rerun_intervals
-- The plan of rerun group root in its order, as a run of the group picks its next interval
-- (crontabber.reruns.plan.pick_next): whether a run of the group logged it done, and its claim now
-- (the last run that claimed it, that run's ledger status, whether the claim expired, whether
-- that run is one of the group).
WITH RECURSIVE grp AS (
    SELECT run_id FROM crontabber_run WHERE run_id = %(root)s
    UNION
    SELECT r.run_id FROM crontabber_run AS r JOIN grp ON r.resumed_from = grp.run_id
)
SELECT p.starts,
       EXISTS (SELECT 1 FROM crontabber_log AS l
               WHERE l.app_name = %(app_name)s AND l.success = p.starts
                 AND l.run_id IN (SELECT run_id FROM grp))
       -- or another run (a later rerun, a scheduled run) did it since the rerun began (run
       -- ids grow): a resume does not redo it
       OR COALESCE(i.status = 'succeeded' AND i.run_id > %(root)s, false) AS done,
       i.status, i.run_id, i.kind, i.holder, i.ended,
       COALESCE(i.heartbeat < clock_timestamp() - make_interval(secs => %(lease_seconds)s), false) AS expired,
       h.status AS run_status,
       COALESCE(i.run_id IN (SELECT run_id FROM grp), false) AS in_group
FROM crontabber_run AS root
CROSS JOIN LATERAL unnest(root.plan) WITH ORDINALITY AS p (starts, n)
LEFT JOIN crontabber_interval AS i ON i.app_name = %(app_name)s AND i.starts = p.starts
LEFT JOIN crontabber_run AS h ON h.run_id = i.run_id
WHERE root.run_id = %(root)s
ORDER BY p.n;

-- name: lane_heartbeat
-- A rerun's lease: its ledger row and the interval it holds. No row: the run no longer
-- counts as running (found abandoned, or ended): fenced off.
WITH renewed AS (
    UPDATE crontabber_run AS run
    SET heartbeat = clock_timestamp(), output = COALESCE(%(output)s, run.output),
        output_dropped = COALESCE(%(dropped)s, run.output_dropped)
    WHERE run_id = %(run_id)s AND status = 'running'
    RETURNING run_id, heartbeat
), intervals AS (
    UPDATE crontabber_interval AS i SET heartbeat = renewed.heartbeat
    FROM renewed
    WHERE i.run_id = renewed.run_id AND i.status = 'running'
)
SELECT heartbeat FROM renewed;

-- name: lane_status
SELECT status FROM crontabber_run WHERE run_id = %(run_id)s FOR UPDATE;

-- name: interval_records
-- What the ledger knows of each of a backfill job's intervals: the last run that claimed it
-- (crontabber_interval) and whether a unit of it ever succeeded (crontabber_log).
SELECT d.starts, i.status, i.run_id, i.kind, i.holder,
       i.heartbeat < clock_timestamp() - make_interval(secs => %(lease_seconds)s) AS expired,
       EXISTS (SELECT 1 FROM crontabber_log AS l
               WHERE l.app_name = %(app_name)s AND l.success = d.starts) AS logged
FROM unnest(%(dates)s::timestamptz[]) AS d (starts)
LEFT JOIN crontabber_interval AS i ON i.app_name = %(app_name)s AND i.starts = d.starts;

-- name: rerun_run
-- A rerun to continue or join (--resume-run): the first run of its group (root), whether its
-- lease expired, and the intervals any run of the group finished.
WITH RECURSIVE grp AS (
    SELECT run_id FROM crontabber_run WHERE run_id = %(root)s
    UNION
    SELECT r.run_id FROM crontabber_run AS r JOIN grp ON r.resumed_from = grp.run_id
)
SELECT r.run_id, r.app_name, r.kind, r.host, r.pid, r.status, r.plan, r.heartbeat,
       r.parallel, r.downstream, r.downstream_of,
       r.heartbeat < clock_timestamp() - make_interval(secs => %(lease_seconds)s) AS expired,
       ARRAY(SELECT DISTINCT l.success FROM crontabber_log AS l
             WHERE l.app_name = r.app_name AND l.run_id IN (SELECT run_id FROM grp)
               AND l.success IS NOT NULL
             ORDER BY l.success) AS done
FROM crontabber_run AS r
WHERE r.run_id = %(root)s;

-- name: abandon_expired_lanes
-- The job's rerun runs killed without recording their end (no heartbeat for lease_seconds):
-- abandoned, by the run that is about to take their intervals over (%(run_id)s on %(host)s).
-- (crontabber_abandon_expired_lanes, migration 0031: each run judged by its own lease.)
SELECT run_id
FROM crontabber_abandon_expired_lanes(%(app_name)s, %(run_id)s, %(host)s, %(lease_seconds)s)
    AS run_id;
