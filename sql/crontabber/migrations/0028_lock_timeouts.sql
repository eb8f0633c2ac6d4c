-- 0028: a bounded wait for the locks of the audit trail and the operator functions (the third
-- security review's N-8). Every audit row took the audit head's row lock with no timeout, and
-- the runner login may insert audit rows: a runner session holding one (stuck, or on purpose)
-- blocked every operator action. Each function now waits at most 5 s for a lock (its own SET:
-- for its call only, so it holds through PgBouncer's transaction pooling); the operator's
-- command then fails naming the session that holds it. Expand only: the release before this
-- one calls the same functions and, on a timeout, reports a database error instead.
-- (Numbered 0028: 0027 is taken by another branch's migration.)
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
