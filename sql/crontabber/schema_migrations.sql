-- Queries of crontabber/schema.py, which applies schema.sql and migrations/.

-- name: recorded
-- The fast path of every tick: is any migration missing, or one of a schema this code loads
-- that it does not know (the database is newer than the code)? The schema column through
-- to_jsonb: a database written before it existed answers too (NULL: recorded by older code).
SELECT array_agg(number ORDER BY number), array_agg(to_jsonb(m) ->> 'schema' ORDER BY number)
FROM schema_migrations m;

-- name: lock
-- Runners that start together apply the schema once: the others wait here.
SELECT pg_advisory_xact_lock(hashtext('crontabber schema'));

-- name: has_table
SELECT to_regclass('schema_migrations') IS NOT NULL AS present;

-- name: create_table
-- schema: the schema a migration belongs to (crontabber, jobs...): added in place, before any
-- migration is recorded, by whichever code first records one with it.
CREATE TABLE IF NOT EXISTS schema_migrations (
    number     integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS schema text;

-- name: owner
-- Who may apply what is missing (a refused login is told whose login to use): the owner of
-- schema_migrations, else (a database without the schema yet) the database's owner.
SELECT current_user AS login,
       coalesce((SELECT pg_get_userbyid(relowner) FROM pg_class
                 WHERE oid = to_regclass('schema_migrations')),
                (SELECT pg_get_userbyid(datdba) FROM pg_database
                 WHERE datname = current_database())) AS owner;

-- name: applied
SELECT number FROM schema_migrations;

-- name: record
INSERT INTO schema_migrations (number, name, schema) VALUES (%(number)s, %(name)s, %(schema)s)
ON CONFLICT (number) DO UPDATE SET schema = EXCLUDED.schema WHERE schema_migrations.schema IS NULL;
