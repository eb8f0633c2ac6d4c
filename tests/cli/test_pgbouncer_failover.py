"""The failover runbook through PgBouncer (issue #44, item 4; docs/deploy.md, "PostgreSQL: a
primary and a standby"): a PgBouncer of this test's own (its own port and directory; the
shared services are not touched) started from docs/deploy.md's ``pgbouncer.ini`` block, in
front of a "primary" and a "standby" that are two TCP proxies to the test server. The primary
is cut, PgBouncer's entry repointed at the standby and reloaded from its console by the
documented admin login (the guide's file once refused that: ``admin access needed``), and
the ticks go on; a tick that met the outage says why in PgBouncer's or the server's words."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.fixtures.pgbouncer import ADMIN, Bouncer, documented_ini, running_bouncer
from tests.fixtures.tcp_proxy import TcpProxy
from tests.fixtures.waiting import wait_for


@pytest.fixture
def bouncer(cli) -> Iterator[tuple[Bouncer, TcpProxy]]:
    db = cli.crontab.database
    primary = TcpProxy((db.host, db.port))
    try:
        with running_bouncer(primary.port, {db.user: db.password}) as started:
            cli.env.update(
                RESOURCE_POSTGRESQL_HOST="127.0.0.1",
                RESOURCE_POSTGRESQL_PORT=str(started.port),
            )
            yield started, primary
    finally:
        primary.cut()


def test_the_documented_file_has_an_admin_and_a_short_login_retry():
    settings = dict(
        (part.strip() for part in line.split("=", 1))
        for line in documented_ini().splitlines()
        if "=" in line and not line.startswith(";")
    )
    assert settings["admin_users"] == ADMIN
    assert int(settings["server_login_retry"]) <= 2


def test_a_failover_through_pgbouncer_by_the_runbook(cli, bouncer):
    pgb, primary = bouncer
    cli.crontab.configure(["BasicJob|1d"])
    done = cli.run()
    assert done.returncode == 0, done.stderr
    assert cli.crontab.calls("basic-job")
    # the primary dies; the standby (another way to the same server) is promoted
    primary.cut()
    standby = TcpProxy((cli.crontab.database.host, cli.crontab.database.port))
    try:
        # a tick during the outage: PgBouncer holds it (no server to give it)
        held = cli.spawn()
        wait_for(lambda: "waiting" in pgb.clients(), timeout=30, what="the tick held")
        pgb.backend = standby.port  # step 2: repoint, and RELOAD as the admin login
        pgb.write()
        pgb.reload_from_console()
        _, err = held.communicate(timeout=120)
        # it goes on once PgBouncer has a server, or says why not in one line
        assert held.returncode in (0, 1), err
        assert "connection already closed" not in err and "Traceback" not in err, err
        cli.crontab.configure(["BasicJob|1d", "FooJob|1d"])  # a job due after the failover
        ticks = []

        def ticked() -> bool:
            ticks.append(cli.run())
            return ticks[-1].returncode == 0 and bool(cli.crontab.calls("foo"))

        wait_for(ticked, timeout=60, what="a tick through the repointed PgBouncer")
        for tick in ticks[:-1]:
            assert "connection already closed" not in tick.stderr, tick.stderr
    finally:
        standby.cut()
