-- 0013: alerts (issue #25): events opened once across the fleet, and an outbox of
-- their notifications that any host delivers.
-- An alert: one event of one job (a failure streak, a silence, a takeover, a recovery, a
-- test), unique by (app_name, kind, subject), so whichever host's tick sees it first opens
-- it and no other host can open it again. Conditions that last (failing, silent) stay open
-- until they end (resolved_at); while open they are notified again every realert interval.
CREATE TABLE IF NOT EXISTS crontabber_alert (
    id               bigserial PRIMARY KEY,
    app_name         text NOT NULL,
    kind             text NOT NULL CHECK (kind IN ('failing', 'recovered', 'silent', 'takeover',
                                                   'test')),
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
    WHERE resolved_at IS NULL AND kind IN ('failing', 'silent');

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
