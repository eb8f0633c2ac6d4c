"""A primary with a streaming standby (``scripts/services.sh start pgs``: a pg_basebackup of
the local PostgreSQL, a second cluster on its own port): a runner whose database is the
standby says so in one line, and one given both servers in libpq's multi-host form with
``target_session_attrs = read-write`` runs on the primary, whichever is listed first."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Iterator

import psycopg2
import pytest

from crontabber.config.database import DatabaseSettings
from tests.fixtures.own_services import replicated, standby_port  # noqa: F401 - the fixture
from tests.helpers import REPO, SERVICES


def pointed_at(cli, host: str, port: str, attrs: str = "") -> dict[str, str]:
    return {
        **cli.env,
        "RESOURCE_POSTGRESQL_HOST": host,
        "RESOURCE_POSTGRESQL_PORT": port,
        "RESOURCE_POSTGRESQL_TARGET_SESSION_ATTRS": attrs,
    }


def run(cli, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        cli.argv(*args), env=env, cwd=REPO, capture_output=True, text=True, timeout=60
    )


def test_a_runner_on_the_standby_says_so_in_one_line(cli, crontab, standby_port):
    crontab.configure(["FooJob|1h"])
    replicated(crontab.database, standby_port)
    env = pointed_at(cli, "127.0.0.1", str(standby_port))
    tick = run(cli, env)
    assert tick.returncode == 1
    assert tick.stderr.count("\n") == 1 and "Traceback" not in tick.stderr, tick.stderr
    assert f"127.0.0.1:{standby_port} is a read-only standby (in recovery)" in tick.stderr
    assert "target_session_attrs = read-write" in tick.stderr
    nagios = run(cli, env, "--nagios")
    assert nagios.returncode == 2
    assert nagios.stdout.startswith("CRITICAL - "), nagios.stdout
    assert f":{standby_port} is a read-only standby" in nagios.stdout, nagios.stdout
    assert crontab.calls() == []  # nothing ran anywhere


def test_a_job_command_on_the_standby_says_so_in_one_line(cli, crontab, standby_port):
    crontab.configure(["jobs.prune.PruneS3CronApp|1d"])
    replicated(crontab.database, standby_port)
    done = subprocess.run(
        [sys.executable, "-m", "jobs.prune", f"--admin.conf={crontab.ini}", "history"],
        env=pointed_at(cli, "127.0.0.1", str(standby_port)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "is a read-only standby" in done.stderr, done.stderr


def test_both_servers_listed_with_read_write_run_on_the_primary(cli, crontab, standby_port):
    crontab.configure(["FooJob|1h"])
    replicated(crontab.database, standby_port)
    primary = str(crontab.database.port)
    hosts = "127.0.0.1,127.0.0.1"
    env = pointed_at(cli, hosts, f"{standby_port},{primary}", "read-write")  # the standby first
    tick = run(cli, env)
    assert tick.returncode == 0, tick.stderr
    assert [c["app_name"] for c in crontab.calls()] == ["foo"]
    listed = run(cli, env, "--list-jobs")
    assert listed.returncode == 0 and "foo" in listed.stdout
    # without read-write, libpq takes the first that answers: the standby, refused in one line
    first = run(cli, pointed_at(cli, hosts, f"{standby_port},{primary}"), "--list-jobs")
    assert first.returncode == 1 and "is a read-only standby" in first.stderr


def test_the_standby_is_a_real_streaming_replica(standby_port):
    conn = psycopg2.connect(**{**SERVICES.database(), "port": standby_port})
    try:
        with conn.cursor() as cur:
            # in recovery, and WAL received by streaming (NULL for a standby fed otherwise)
            cur.execute("SELECT pg_is_in_recovery(), pg_last_wal_receive_lsn() IS NOT NULL")
            assert cur.fetchone() == (True, True)
    finally:
        conn.close()
    assert os.path.isdir(SERVICES.service_dir / "pgs" / "data")
