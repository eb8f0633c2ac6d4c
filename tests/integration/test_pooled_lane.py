"""The pooled lane is what it says: with ``SYMBOLS_TEST_POOLED=1`` (``make test``'s second
run) every test database is reached through PgBouncer, whose own statistics count this
test's transactions; without it, directly. Either way its sessions are not in UTC. A setting that
silently fell back to a direct connection would fail here."""

from __future__ import annotations

from tests.helpers import POOLED, SERVICES, TEST_TIME_ZONE


def test_the_test_databases_are_reached_as_the_lane_says(database, db_conn):
    with db_conn.cursor() as cur:
        cur.execute("SHOW timezone")
        zone = cur.fetchone()[0]
        for _ in range(3):
            cur.execute("SELECT 1")
    stats = SERVICES.pgbouncer_stats()
    if POOLED:
        assert database.port == SERVICES.pgb_port
        assert stats[database.dbname]["total_xact_count"] >= 4
    else:
        assert database.port == SERVICES.pg_port
        assert database.dbname not in stats
    assert zone == TEST_TIME_ZONE
