-- The alerts' queries (crontabber.alerts.store; the sweep's: crontabber.alerts.sweep; the
-- tables: migration 0013). Every statement that decides who notifies is one statement whose
-- WHERE or ON CONFLICT lets one host win: opening (the unique key), resolving (resolved_at IS
-- NULL), re-alerting (next_notice due), claiming a notice (FOR UPDATE SKIP LOCKED and an
-- expired claim).

-- name: alerts_sweep
-- A tick's one alerts statement: claim the notices due (new, retried, or left by a host
-- that died; with alert_ids, only those alerts' notices; without, never a test's: a test
-- is tried once, by --test-alert itself), list the open alerts (the plan
-- needs them to resolve and re-alert; the open broken-entry and old-code events too: a tick
-- ends them),
-- the maintenance windows in force (app_name: the
-- scope; next_notice: until) and the holders of this host (%(this_host)s) whose claims
-- still run (app_name: the holder). %(dead)s: holders of this host whose process is gone:
-- their claims are taken over without waiting for claim_until (crontabber.alerts.sweep).
WITH claimed AS (  -- crontabber_notices_claim (migration 0031): the claim, by this login,
    -- only when a notice is due (an idle tick calls no function: see crontabber.sql's tick)
    SELECT * FROM crontabber_notices_claim(%(host)s, %(claim_seconds)s, %(limit)s,
                                           %(dead)s::text[], %(alert_ids)s::bigint[])
    WHERE EXISTS (SELECT 1 FROM crontabber_notice
                  WHERE sent_at IS NULL AND NOT given_up AND next_attempt <= clock_timestamp())
)
SELECT 'notice' AS row_kind, c.id AS notice_id, c.notice, c.target, c.attempts,
       a.id, a.app_name, a.kind, a.subject, a.message, a.detail, a.opened_at, a.opened_by,
       a.next_notice
FROM claimed c JOIN crontabber_alert a ON a.id = c.alert_id
UNION ALL
SELECT 'open', NULL, NULL, NULL, NULL,
       a.id, a.app_name, a.kind, a.subject, a.message, a.detail, a.opened_at, a.opened_by,
       a.next_notice
FROM crontabber_alert a
WHERE a.resolved_at IS NULL AND a.kind IN ('failing', 'silent', 'late', 'no-host')
UNION ALL
-- the open broken-entry and old-code events (the runner's own: ended by a tick of the host that
-- found them, once its jobs entries load, or its code knows the schema; the unique key's index)
SELECT 'open', NULL, NULL, NULL, NULL,
       a.id, a.app_name, a.kind, a.subject, a.message, a.detail, a.opened_at, a.opened_by,
       a.next_notice
FROM crontabber_alert a
WHERE a.app_name = 'crontabber' AND a.kind IN ('broken-entry', 'old-code')
  AND a.resolved_at IS NULL
UNION ALL
SELECT 'mute', NULL, NULL, NULL, NULL, NULL, m.scope, NULL, NULL, m.reason, NULL, m.at, m.muted_by,
       m.until
FROM crontabber_mute m
WHERE m.until > clock_timestamp()
UNION ALL
SELECT 'held', NULL, NULL, NULL, NULL, NULL, h.claimed_by, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM (SELECT DISTINCT claimed_by FROM crontabber_notice
      WHERE sent_at IS NULL AND claim_until >= clock_timestamp()
        AND substring(claimed_by from '^(.*):[0-9]+$') = %(this_host)s) h;

-- name: alert_open
-- Open an alert and its first notices, unless any host opened it already: its id, or no row.
WITH opened AS (
    INSERT INTO crontabber_alert (app_name, kind, subject, opened_by, message, detail, next_notice)
    VALUES (%(app_name)s, %(kind)s, %(subject)s, %(host)s, %(message)s, %(detail)s,
            CASE WHEN %(realert_seconds)s > 0
                 THEN clock_timestamp() + make_interval(secs => %(realert_seconds)s) END)
    ON CONFLICT (app_name, kind, subject) DO NOTHING
    RETURNING id
), notices AS (
    INSERT INTO crontabber_notice (alert_id, notice, target)
    SELECT opened.id, 1, target FROM opened, unnest(%(targets)s::text[]) AS target
    RETURNING id
)
SELECT id FROM opened;

-- name: alerts_open_of
-- The open alerts of one job and kind (a job's breach events: ended by a later run that passes
-- the rule), oldest first; read by the unique key's index.
SELECT id, app_name, kind, subject, message, detail, next_notice
FROM crontabber_alert
WHERE app_name = %(app_name)s AND kind = %(kind)s AND resolved_at IS NULL
ORDER BY id;

-- name: alert_insert
-- An alert without its notices (alert_supersede adds them after the superseded notice, so
-- that one is sent first): its id, or no row when any host opened it already.
INSERT INTO crontabber_alert (app_name, kind, subject, opened_by, message, detail, next_notice)
VALUES (%(app_name)s, %(kind)s, %(subject)s, %(host)s, %(message)s, %(detail)s,
        CASE WHEN %(realert_seconds)s > 0
             THEN clock_timestamp() + make_interval(secs => %(realert_seconds)s) END)
ON CONFLICT (app_name, kind, subject) DO NOTHING
RETURNING id;

-- name: notices_insert
-- The first notices of alert %(id)s, one per target.
INSERT INTO crontabber_notice (alert_id, notice, target)
SELECT %(id)s, 1, target FROM unnest(%(targets)s::text[]) AS target;

-- name: alert_resolve
-- End an open alert (its condition is over): a row for the one host that ended it. An ended
-- broken-entry or old-code alert gives up its subject (the entry and its error, the host and
-- what it lacks: the unique key), so that the same entry breaking again, or the same host
-- downgraded again, opens a new alert: those causes can come back as they were. (The other
-- kinds' subjects name a streak, a due time, a run: they cannot, and a host whose view is a
-- moment old must not open an ended streak again.)
UPDATE crontabber_alert
SET resolved_at = clock_timestamp(), next_notice = NULL,
    subject = CASE WHEN kind IN ('broken-entry', 'old-code')
                   THEN subject || ' (alert ' || id || ', ended)' ELSE subject END
WHERE id = %(id)s AND resolved_at IS NULL
RETURNING id, notified;

-- name: alert_refresh
-- An open alert's condition reads differently now (a longer streak): its current text.
UPDATE crontabber_alert SET message = %(message)s, detail = detail || %(detail)s::jsonb
WHERE id = %(id)s AND resolved_at IS NULL;

-- name: alert_realert
-- Notify an open alert again once its next notice is due: a row for the one host that does.
WITH bumped AS (
    UPDATE crontabber_alert
    SET notified = notified + 1,
        next_notice = clock_timestamp() + make_interval(secs => %(realert_seconds)s)
    WHERE id = %(id)s AND resolved_at IS NULL AND next_notice <= clock_timestamp()
    RETURNING id, notified
), notices AS (
    INSERT INTO crontabber_notice (alert_id, notice, target)
    SELECT bumped.id, bumped.notified, target FROM bumped, unnest(%(targets)s::text[]) AS target
    RETURNING id
)
SELECT id, notified FROM bumped;

-- name: notice_sent
-- Only by the claim that sent it (crontabber_notice_sent, migration 0031).
SELECT %(id)s AS id WHERE crontabber_notice_sent(%(id)s, %(host)s);

-- name: notice_failed
-- A failed attempt: retried after %(retry_seconds)s, or given up after max_attempts; no row:
-- not this host's claim (crontabber_notice_failed, migration 0031).
SELECT given_up FROM crontabber_notice_failed(%(id)s, %(host)s, %(error)s, %(retry_seconds)s,
                                              %(max_attempts)s) AS given_up
WHERE given_up IS NOT NULL;

-- name: alerts_list
-- Alerts newest first (one job's, or all), each with its notices.
SELECT a.id, a.app_name, a.kind, a.subject, a.opened_at, a.opened_by, a.message, a.detail,
       a.resolved_at, a.notified, a.next_notice,
       COALESCE(json_agg(json_build_object(
           'notice', n.notice, 'target', n.target, 'created_at', n.created_at,
           'sent_at', n.sent_at, 'sent_by', n.sent_by, 'attempts', n.attempts,
           'given_up', n.given_up, 'last_error', n.last_error, 'next_attempt', n.next_attempt,
           'claimed_by', n.claimed_by, 'claim_until', n.claim_until)
           ORDER BY n.id) FILTER (WHERE n.id IS NOT NULL), '[]') AS notices
FROM crontabber_alert a LEFT JOIN crontabber_notice n ON n.alert_id = a.id
WHERE %(app_name)s::text IS NULL OR a.app_name = %(app_name)s
GROUP BY a.id
ORDER BY a.id DESC
LIMIT %(limit)s;

-- name: mute
-- Start a maintenance window of one job or of all ('*'); false when a window of that scope is
-- in force and %(replace)s is false (it stays as it was). Audited by the function (0025).
SELECT crontabber_mute(%(scope)s, %(until)s, %(replace)s, %(audit)s::json) AS muted;

-- name: unmute
SELECT crontabber_unmute(%(scope)s, %(audit)s::json) AS unmuted;

-- name: mutes
-- The windows in force, or the one of a scope.
SELECT scope, until, muted_by, reason, at FROM crontabber_mute
WHERE until > clock_timestamp() AND (%(scope)s::text IS NULL OR scope IN (%(scope)s, '*'))
ORDER BY scope;
