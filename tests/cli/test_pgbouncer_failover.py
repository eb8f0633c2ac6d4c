"""The failover runbook through PgBouncer (issue #44, item 4; docs/deploy.md, "PostgreSQL: a
primary and a standby"): a PgBouncer of this test's own (its own port and directory; the
shared services are not touched) started from docs/deploy.md's ``pgbouncer.ini`` block, in
front of a "primary" and a "standby" that are two TCP proxies to the test server. The primary
is cut, PgBouncer's entry repointed at the standby and reloaded from its console by the
documented admin login (the guide's file once refused that: ``admin access needed``), and
the ticks go on; a tick that met the outage says why in PgBouncer's or the server's words."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Iterator

import psycopg2
import pytest

from tests.fixtures.tcp_proxy import TcpProxy
from tests.fixtures.waiting import wait_for
from tests.helpers import REPO

PGBOUNCER = "/usr/sbin/pgbouncer"
ADMIN = "pgbouncer_admin"


def documented_ini() -> str:
    """docs/deploy.md's ``pgbouncer.ini`` block."""
    text = (REPO / "docs" / "deploy.md").read_text()
    (block,) = re.findall(r"```ini\n(; /etc/pgbouncer/pgbouncer.ini\n.*?)```", text, re.S)
    return block


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Bouncer:
    """The documented file with this machine's addresses, run as ``postgres``."""

    def __init__(self, directory: Path, backend: int, user: str, password: str) -> None:
        self.dir, self.port, self.backend = directory, free_port(), backend
        self.admin_password = uuid.uuid4().hex
        (directory / "userlist.txt").write_text(
            f'"{user}" "{password}"\n"{ADMIN}" "{self.admin_password}"\n'
        )
        self.write()
        owner = pwd.getpwnam("postgres")
        for path in (directory, *directory.iterdir()):
            os.chown(path, owner.pw_uid, owner.pw_gid)
        subprocess.run(
            ["runuser", "-u", "postgres", "--", PGBOUNCER, "-q", "-d", str(self.ini)],
            check=True,
            timeout=30,
        )
        wait_for(lambda: self._listening(), timeout=30, what="PgBouncer listening")

    @property
    def ini(self) -> Path:
        return self.dir / "pgbouncer.ini"

    def write(self) -> None:
        lines = []
        for line in documented_ini().splitlines():
            key = line.split("=", 1)[0].strip()
            if key == "*":
                line = f"* = host=127.0.0.1 port={self.backend}"
            elif key == "listen_addr":
                line = "listen_addr = 127.0.0.1"
            elif key == "listen_port":
                line = f"listen_port = {self.port}"
            elif key == "auth_file":
                line = f"auth_file = {self.dir / 'userlist.txt'}"
            lines.append(line)
        lines += [  # what a service manager would otherwise provide (docs/deploy.md)
            f"pidfile = {self.dir / 'pgbouncer.pid'}",
            f"logfile = {self.dir / 'pgbouncer.log'}",
            "unix_socket_dir =",
        ]
        self.ini.write_text("\n".join(lines) + "\n")

    def _listening(self) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def reload_from_console(self) -> None:
        """``psql -U pgbouncer_admin pgbouncer -c RELOAD``, as the runbook says."""
        conn = psycopg2.connect(
            host="127.0.0.1",
            port=self.port,
            dbname="pgbouncer",
            user=ADMIN,
            password=self.admin_password,
        )
        conn.autocommit = True
        try:
            conn.cursor().execute("RELOAD")
        finally:
            conn.close()

    def clients(self) -> str:
        """The states of PgBouncer's client connections (``SHOW CLIENTS``: active, waiting)."""
        conn = psycopg2.connect(
            host="127.0.0.1",
            port=self.port,
            dbname="pgbouncer",
            user=ADMIN,
            password=self.admin_password,
        )
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW CLIENTS")
                state = [column.name for column in cur.description].index("state")
                return " ".join(str(row[state]) for row in cur.fetchall())
        finally:
            conn.close()

    def stop(self) -> None:
        pidfile = self.dir / "pgbouncer.pid"
        if pidfile.exists():
            pid = int(pidfile.read_text())
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda: not self._alive(pid), timeout=30, what="PgBouncer stopped")

    @staticmethod
    def _alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


@pytest.fixture
def bouncer(cli) -> Iterator[tuple[Bouncer, TcpProxy]]:
    if not Path(PGBOUNCER).exists():
        pytest.fail(f"{PGBOUNCER} is missing (scripts/services.sh installs it)")
    db = cli.crontab.database
    primary = TcpProxy((db.host, db.port))
    directory = Path(tempfile.mkdtemp(prefix="crontabber-pgb-"))
    directory.chmod(0o755)
    started = Bouncer(directory, primary.port, db.user, db.password)
    cli.env.update(RESOURCE_POSTGRESQL_HOST="127.0.0.1", RESOURCE_POSTGRESQL_PORT=str(started.port))
    try:
        yield started, primary
    finally:
        started.stop()
        primary.cut()
        shutil.rmtree(directory, ignore_errors=True)


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
