"""The runner's schema (sql/crontabber) and the jobs' (sql/jobs): each schema.sql agrees with
its migrations; a runner without the jobs creates none of their tables; a site that adds the
jobs later gets them; existing crontabber 0.18 databases keep working."""

import time
from pathlib import Path

import psycopg2
import pytest

from crontabber import sqlfiles
from crontabber.schema import (
    RUNNER,
    apply_migrations_only,
    ensure_schema,
    migrations,
    round_trip_cursor,
    with_runner,
)
from crontabber.store import connect
from jobs import SQL_DIR as JOBS_SQL

BOTH = with_runner([JOBS_SQL])

CATALOG = """
SELECT 'column' AS kind, table_name || '.' || column_name AS name,
       concat_ws(' ', data_type, udt_name, is_nullable, column_default) AS detail
FROM information_schema.columns WHERE table_schema = 'public'
UNION ALL
SELECT 'index', indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'
UNION ALL
SELECT 'constraint', conrelid::regclass || '.' || conname, pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = 'public'::regnamespace
UNION ALL
SELECT 'function', p.oid::regprocedure::text,
       concat_ws(' ', pg_get_functiondef(p.oid), p.proacl::text)
FROM pg_proc AS p WHERE p.pronamespace = 'public'::regnamespace
UNION ALL
SELECT 'trigger', tgrelid::regclass || '.' || tgname, pg_get_triggerdef(oid)
FROM pg_trigger WHERE NOT tgisinternal
UNION ALL
SELECT 'grants', c.oid::regclass::text,
       concat_ws(' ', c.relacl::text,
                 (SELECT string_agg(a.attname || '=' || a.attacl::text, ' ' ORDER BY a.attnum)
                  FROM pg_attribute AS a WHERE a.attrelid = c.oid AND a.attacl IS NOT NULL))
FROM pg_class AS c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'S')
ORDER BY 1, 2
"""
TABLES = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1"
RUNNER_TABLES = [
    "crontabber",
    "crontabber_alert",
    "crontabber_audit",
    "crontabber_audit_head",
    "crontabber_host",
    "crontabber_interval",
    "crontabber_log",
    "crontabber_mute",
    "crontabber_notice",
    "crontabber_run",
    "schema_migrations",
]


def catalog(settings):
    conn = connect(settings)
    try:
        with conn.cursor() as cur:
            cur.execute(CATALOG)
            return cur.fetchall()
    finally:
        conn.close()


def tables(conn):
    with conn.cursor() as cur:
        cur.execute(TABLES)
        return [row[0] for row in cur.fetchall()]


def test_schema_equals_migrations(empty_database, database):
    conn = connect(empty_database)
    apply_migrations_only(conn, BOTH)
    conn.close()
    # The grants depend on which of the cluster-wide roles existed when a database was built
    # (`database` may come from a template made before tests/cli/test_roles.py created them):
    # both get the rights the roles have now, as a DBA's crontabber_grant_rights() would give.
    for settings in (empty_database, database):
        conn = connect(settings)
        with conn, conn.cursor() as cur:
            cur.execute("SELECT crontabber_grant_rights()")
        conn.close()
    from_migrations = [row for row in catalog(empty_database) if "schema_migrations" not in row[1]]
    from_schema = [row for row in catalog(database) if "schema_migrations" not in row[1]]
    assert from_schema == from_migrations
    assert any(row[1] == "crontabber.ongoing_by" for row in from_schema)
    assert any(row[1] == "upload.inbox_key" for row in from_schema)


def test_ensure_schema_is_idempotent_and_records_migrations(database):
    conn = connect(database)
    try:
        assert ensure_schema(conn, BOTH) == []
        with conn.cursor() as cur:
            cur.execute("SELECT number FROM schema_migrations ORDER BY number")
            assert [r[0] for r in cur.fetchall()] == [m.number for m in migrations(*BOTH)]
    finally:
        conn.close()


def test_a_runner_without_the_jobs_creates_only_crontabbers_tables_and_gets_them_later(
    empty_database,
):
    """Another project's crontabber apps: the runner's tables only. Adding the symbol
    server's jobs later brings theirs (their schema.sql, their numbers recorded)."""
    conn = connect(empty_database)
    try:
        assert ensure_schema(conn, RUNNER) == ["crontabber/schema.sql"]
        assert tables(conn) == RUNNER_TABLES
        assert ensure_schema(conn, RUNNER) == []
        assert ensure_schema(conn, BOTH) == ["jobs/schema.sql"]
        assert {"upload", "missing_symbol", "prune_run", "search_index_watermark"} <= set(
            tables(conn)
        )
        with conn.cursor() as cur:
            cur.execute("SELECT number FROM schema_migrations ORDER BY number")
            assert [r[0] for r in cur.fetchall()] == [m.number for m in migrations(*BOTH)]
        assert ensure_schema(conn, BOTH) == []
    finally:
        conn.close()


def test_one_number_sequence_over_both_schemas():
    runner, jobs = {m.number for m in migrations(*RUNNER)}, {m.number for m in migrations(JOBS_SQL)}
    assert runner and jobs and not runner & jobs


CRONTABBER_018 = """
CREATE TABLE crontabber (app_name text NOT NULL, next_run timestamptz, first_run timestamptz,
  last_run timestamptz, last_success timestamptz, error_count integer DEFAULT 0,
  depends_on text[], last_error json);
CREATE UNIQUE INDEX crontabber_unique_app_name_idx ON crontabber (app_name);
CREATE TABLE crontabber_log (id SERIAL NOT NULL, app_name text NOT NULL,
  log_time timestamptz DEFAULT now() NOT NULL, duration interval, success timestamptz,
  exc_type text, exc_value text, exc_traceback text);
INSERT INTO crontabber VALUES ('foo', now() + interval '1 day', now(), now(), now(), 0, '{}', '{}');
"""


def test_a_database_written_by_crontabber_018_before_012_keeps_working(empty_database):
    conn = connect(empty_database)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(CRONTABBER_018)  # no `ongoing` column: crontabber before 0.12
    assert ensure_schema(conn) == ["crontabber/schema.sql"]
    with conn.cursor() as cur:
        cur.execute("SELECT app_name, ongoing, ongoing_by, error_count FROM crontabber")
        assert cur.fetchall() == [("foo", None, None, 0)]
    conn.close()


def test_pending_migrations_are_applied_in_order(empty_database, tmp_path):
    sql = tmp_path / "sql"
    (sql / "migrations").mkdir(parents=True)
    (sql / "schema.sql").write_text("CREATE TABLE IF NOT EXISTS t (a int);")
    (sql / "migrations" / "0001_t.sql").write_text("CREATE TABLE IF NOT EXISTS t (a int);")
    conn = connect(empty_database)
    assert ensure_schema(conn, [sql]) == [f"{tmp_path.name}/schema.sql"]
    (sql / "migrations" / "0002_b.sql").write_text("ALTER TABLE t ADD COLUMN b int;")
    (sql / "migrations" / "0003_c.sql").write_text("ALTER TABLE t ADD COLUMN c int;")
    assert ensure_schema(conn, [sql]) == ["0002_b", "0003_c"]
    assert ensure_schema(conn, [sql]) == []
    # a lower number merged after higher ones were applied is still applied
    (sql / "migrations" / "0000_z.sql").write_text("ALTER TABLE t ADD COLUMN z int;")
    assert ensure_schema(conn, [sql]) == ["0000_z"]
    with conn.cursor() as cur:
        cur.execute("SELECT a, b, c, z FROM t")
    conn.close()


def test_query_files_parse():
    assert "claim" not in sqlfiles.load("crontabber.sql")
    assert {"clock", "lock_state", "finish"} <= set(sqlfiles.load("crontabber.sql"))
    assert "delete_batch" in sqlfiles.load("runlog.sql", JOBS_SQL)


def test_a_round_trip_cursor_sends_each_statement_as_its_own_transaction(empty_database):
    """An idle tick's statements go without psycopg2's BEGIN and COMMIT: SET LOCAL holds in
    the query string's implicit transaction and no further; a connection in a transaction
    already has it committed, as ``with connection`` did."""
    conn = connect(empty_database)
    try:
        with round_trip_cursor(conn) as cur:
            cur.execute("SHOW synchronous_commit")
            (default,) = cur.fetchone()  # off on a cluster started --fast (tests only)
            other = "local" if default == "off" else "off"
            cur.execute(f"SET LOCAL synchronous_commit = {other}; SHOW synchronous_commit")
            assert cur.fetchone() == (other,)
            cur.execute("SHOW synchronous_commit")
            assert cur.fetchone() == (default,)
        assert not conn.autocommit and not conn.notices
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE t (x int)")  # a transaction left open
        with round_trip_cursor(conn) as cur:
            cur.execute("INSERT INTO t VALUES (1)")
        assert not conn.autocommit
        other = connect(empty_database)
        with other.cursor() as cur:
            cur.execute("SELECT x FROM t")
            assert cur.fetchall() == [(1,)]
        other.close()
    finally:
        conn.close()


def test_migration_0025_chains_the_audit_rows_written_before_it(empty_database):
    """A database at 0024 with audit rows: 0025 hashes them in id order (their database user
    unknown), then chains new rows after them; --verify-audit's check finds the chain whole."""
    from crontabber.audit_store import AuditStore
    from crontabber.store import StateStore

    conn = connect(empty_database)
    with conn, conn.cursor() as cur:
        for migration in migrations(*BOTH):
            if migration.number < 25:
                cur.execute(Path(migration.path).read_text(encoding="utf-8"))
        cur.execute(
            "INSERT INTO crontabber_audit (actor, action, app_name) "
            "VALUES ('a@h', 'pause', 'x'), ('b@h', 'resume', 'x')"
        )
        cur.execute(
            Path(next(m.path for m in migrations(*BOTH) if m.number == 25)).read_text(
                encoding="utf-8"
            )
        )
        cur.execute(
            "INSERT INTO crontabber_audit (actor, action, app_name) VALUES ('c@h', 'reset', 'x')"
        )
        cur.execute(
            "SELECT db_user, prev_hash IS NULL, row_hash IS NOT NULL FROM crontabber_audit ORDER "
            "BY id"
        )
        assert cur.fetchall() == [
            (None, True, True),
            (None, False, True),
            (empty_database.user, False, True),
        ]
    store = AuditStore(StateStore(conn))
    check = store.verify_audit()
    assert (check.rows, check.breaks) == (3, ())
    with conn, conn.cursor() as cur:
        cur.execute("UPDATE crontabber_audit SET actor = 'z@h' WHERE actor = 'a@h'")
    assert store.verify_audit().breaks == ((1, "row 1 was changed after it was written"),)
    conn.close()


def test_a_notice_of_the_schema_is_logged_not_lost(empty_database, tmp_path, caplog):
    # the roles' NOTICE of schema.sql and 0025 (issue #44, P6): psycopg2 keeps notices in
    # connection.notices, which nothing printed; ensure_schema logs each (WARNING)
    sql = tmp_path / "sql"
    (sql / "migrations").mkdir(parents=True)
    (sql / "schema.sql").write_text(
        "DO $$ BEGIN RAISE NOTICE 'role % does not exist and % may not create it "
        "(docs/deploy.md#roles)', 'crontabber_runner', current_user; END $$;"
    )
    (sql / "migrations" / "0001_roles.sql").write_text("SELECT 1;")
    conn = connect(empty_database)
    with caplog.at_level("WARNING", logger="crontabber.schema"):
        ensure_schema(conn, [sql])
    conn.close()
    assert [record.getMessage() for record in caplog.records] == [
        f"database schema: NOTICE: role crontabber_runner does not exist and"
        f" {empty_database.user} may not create it (docs/deploy.md#roles)"
    ]


def test_a_connection_lost_before_the_schema_check_keeps_the_servers_error(empty_database):
    # issue #44, P11: a tick whose connection PgBouncer or the server had closed printed
    # "connection already closed" (the round-trip cursor's clean-up on the closed
    # connection) instead of the server's own reason
    owner = connect(empty_database)
    with owner, owner.cursor() as cur:
        cur.execute(f"ALTER DATABASE {empty_database.dbname} SET idle_session_timeout = '50ms'")
    owner.close()
    conn = connect(empty_database)
    time.sleep(0.5)  # idle past the timeout: the server ends the session
    with pytest.raises(psycopg2.OperationalError, match="server closed the connection"):
        ensure_schema(conn, BOTH)
    assert conn.closed


def test_a_statement_refused_to_the_owner_itself_keeps_the_servers_words(empty_database, tmp_path):
    # SchemaNeedsOwner is for another login (a runner's); the owner refused a statement of
    # a role with more rights is told the server's reason, not to run as itself
    sql = tmp_path / "sql"
    (sql / "migrations").mkdir(parents=True)
    (sql / "schema.sql").write_text("CREATE ROLE test_never_made NOLOGIN;")  # no CREATEROLE
    (sql / "migrations" / "0001_system.sql").write_text("SELECT 1;")
    conn = connect(empty_database)
    with pytest.raises(psycopg2.errors.InsufficientPrivilege, match="create role"):
        ensure_schema(conn, [sql])
    conn.close()


def test_applying_the_real_schema_logs_no_noise(empty_database, caplog):
    # PostgreSQL's "trigger ... does not exist, skipping" of every DROP ... IF EXISTS on a new
    # database is not news: a first `make run` printed a dozen such WARNING lines
    conn = connect(empty_database)
    with caplog.at_level("WARNING", logger="crontabber.schema"):
        ensure_schema(conn, BOTH)
    conn.close()
    assert [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()] == []
