-- Queries of crontabber/schema.py, which applies schema.sql and migrations/.

-- name: recorded
-- The fast path of every tick: is any migration missing?
SELECT array_agg(number) FROM schema_migrations;

-- name: lock
-- Runners that start together apply the schema once: the others wait here.
SELECT pg_advisory_xact_lock(hashtext('crontabber schema'));

-- name: has_table
SELECT to_regclass('schema_migrations') IS NOT NULL AS present;

-- name: create_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    number     integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: applied
SELECT number FROM schema_migrations;

-- name: record
INSERT INTO schema_migrations (number, name) VALUES (%(number)s, %(name)s)
ON CONFLICT (number) DO NOTHING;
