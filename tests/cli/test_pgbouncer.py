"""The runner through PgBouncer in transaction pooling mode (Debian 12's 1.18, stock settings
but for where it listens and who may log in: ``scripts/services.sh``'s ``pgb``), against a
database whose sessions are not in UTC.

PgBouncer before 1.20 refuses the ``options`` startup parameter, which the runner used to
set the session's time zone: it could not connect at all. Nothing may lean on session state
behind a transaction pooler, and nothing needs the session's time zone.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Iterator

import psycopg2
import pytest

from crontabber.config.database import DatabaseSettings
from crontabber.store import connect
from tests.helpers import SERVICES, fresh_database
from tests.helpers import TEST_TIME_ZONE as ZONE


@pytest.fixture
def database(template_database: str) -> Iterator[DatabaseSettings]:
    """This module's test databases are reached through PgBouncer in either lane."""
    with fresh_database("test_pgb", template_database, pooled=True) as settings:
        yield settings


def test_the_pooler_is_one_that_refuses_startup_options(database):
    """What made the runner unusable behind PgBouncer 1.18: it refuses ``options``."""
    with pytest.raises(psycopg2.OperationalError, match="unsupported startup parameter: options"):
        psycopg2.connect(
            host=database.host,
            port=database.port,
            dbname=database.dbname,
            user=database.user,
            password=database.password,
            options="-c timezone=UTC",
        )


def test_a_tick_runs_through_pgbouncer_and_its_times_are_utc(cli, crontab):
    crontab.configure(["BasicJob|1d|00:00", "FooJob|1h"])  # 00:00: due at any hour
    before = SERVICES.pgbouncer_stats().get(crontab.database.dbname, {}).get("total_xact_count", 0)
    done = cli.run()
    assert done.returncode == 0, done.stderr
    assert sorted(c["app_name"] for c in crontab.calls()) == ["basic-job", "foo"]
    with crontab.conn.cursor() as cur:
        cur.execute("SHOW timezone")
        assert cur.fetchone()[0] == ZONE  # the sessions' zone is not UTC
    # the daily job's next run is 00:00 UTC, whatever the sessions' zone
    next_run = crontab.state("basic-job").next_run.astimezone(dt.timezone.utc)
    assert (next_run.hour, next_run.minute) == (0, 0)
    explained = cli.run("--explain", "basic-job")
    assert explained.returncode == 0, explained.stderr
    assert re.search(rf"{next_run:%Y-%m-%d} 00:00(:00)? UTC", explained.stdout), explained.stdout
    listed = cli.run("--list-jobs", "--json")
    assert f'"{next_run:%Y-%m-%dT}00:00:00' in listed.stdout, listed.stdout
    # the proof it went through PgBouncer: its own count of this database's transactions
    after = SERVICES.pgbouncer_stats()[crontab.database.dbname]["total_xact_count"]
    assert after - before >= 10, (before, after)


def test_a_connection_through_pgbouncer_carries_no_session_state(database):
    """What the runner's connect() sends: nothing a transaction pooler cannot hand on."""
    conn = connect(database)
    try:
        with conn, conn.cursor() as cur:
            cur.execute("SELECT current_setting('application_name'), current_setting('TimeZone')")
            assert cur.fetchone() == ("crontabber", ZONE)
    finally:
        conn.close()
