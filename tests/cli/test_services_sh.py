"""``scripts/services.sh`` from a checkout the service users cannot enter.

A clone under a mode-700 directory (root's home on Debian) is out of reach of
the ``postgres`` and ``symbols-es`` OS users. The script keeps their data in a
per-checkout directory under /var/lib/symbols-services instead, and ``stop``
and ``clean`` act on that checkout's services and data only.

Cheap on purpose: only PostgreSQL is started (fsync off), on a free port, from
a copy of the script in a private directory; the shared services of the test
session are only checked to be still answering at the end. Elasticsearch (the
other service user) and s3proxy (run as root) are not started here.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path
from typing import Iterator

import psycopg2
import pytest

import devservices
from tests.helpers import ENV

REPO = Path(__file__).resolve().parent.parent.parent
SERVICES_ROOT = Path("/var/lib/symbols-services")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(port: int) -> bool:
    """True if something accepts TCP connections on 127.0.0.1:``port``."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False


class Checkout:
    """A checkout holding only scripts/services.sh, its services on its own ports."""

    def __init__(self, root: Path, pg_port: int) -> None:
        self.root = root
        self.pg_port = pg_port
        self.pgb_port = free_port()
        self.state_dir = root.resolve() / ".services"

    def copy(self, root: Path) -> Checkout:
        shutil.copytree(self.root, root, symlinks=True)
        return Checkout(root, self.pg_port)

    def services(self, *args: str, fast: bool = True) -> subprocess.CompletedProcess:
        # No SYMBOLS_* from the caller: SYMBOLS_STATE_DIR may name the shared services' state.
        env = {k: v for k, v in os.environ.items() if not k.startswith("SYMBOLS_")}
        env.update(
            SYMBOLS_PG_PORT=str(self.pg_port),
            SYMBOLS_ES_PORT=str(free_port()),
            SYMBOLS_S3_PORT=str(free_port()),
            SYMBOLS_PGB_PORT=str(self.pgb_port),
            SYMBOLS_PG_FAST="1" if fast else "0",
        )
        return subprocess.run(
            ["bash", str(self.root / "scripts" / "services.sh"), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )

    def service_dirs(self) -> list[Path]:
        """The directories under SERVICES_ROOT whose ``checkout`` file names this state dir."""
        return [
            d
            for d in service_dirs()
            if (d / "checkout").read_text().splitlines()[0] == str(self.state_dir)
        ]


def service_dirs() -> set[Path]:
    return {d for d in SERVICES_ROOT.glob("*") if (d / "checkout").is_file()}


def alive(pid: str) -> bool:
    """True if process ``pid`` exists and is not a zombie (PID 1 may not reap)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def select_one(port: int, dbname: str = "crontabber") -> int:
    conn = psycopg2.connect(
        host="127.0.0.1",
        port=port,
        dbname=dbname,
        user="crontabber",
        password="crontabber",
        connect_timeout=5,
    )
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            return int(cur.fetchone()[0])
    finally:
        conn.close()


@pytest.fixture
def private(tmp_path: Path) -> Iterator[Path]:
    """A mode-700 directory; whatever a test started under it is cleaned afterwards."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    yield private
    for services_sh in private.glob("*/scripts/services.sh"):
        subprocess.run(
            ["bash", str(services_sh), "clean"],
            capture_output=True,
            timeout=240,
            env={k: v for k, v in os.environ.items() if not k.startswith("SYMBOLS_")},
        )


def new_checkout(root: Path) -> Checkout:
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "services.sh", root / "scripts")
    return Checkout(root, free_port())


def test_a_checkout_in_a_mode_700_directory_runs_postgresql_and_cleans_only_its_own(private):
    checkout = new_checkout(private / "clone")
    before = service_dirs()

    started = checkout.services("start", "pg")
    assert started.returncode == 0, started.stderr
    assert select_one(checkout.pg_port) == 1
    (data,) = checkout.service_dirs()
    assert data.name.startswith("clone-")
    assert (data / "pg" / "data" / "postmaster.pid").is_file()
    assert stat.S_IMODE(private.stat().st_mode) == 0o700  # nobody's permissions were changed
    assert str(data) in (checkout.state_dir / "env").read_text()

    # A copy of the checkout (its .services included) is another checkout:
    # cleaning it leaves the original's server and data alone.
    copy = checkout.copy(private / "copy")
    cleaned = copy.services("clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not copy.state_dir.exists()
    assert select_one(checkout.pg_port) == 1 and data.is_dir()

    stopped = checkout.services("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not answers(checkout.pg_port)
    assert (data / "pg" / "data" / "PG_VERSION").is_file()  # stop keeps the data

    cleaned = checkout.services("clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not data.exists() and not checkout.state_dir.exists()
    assert before <= service_dirs()  # no other checkout's data was touched
    assert answers(devservices.Services(ENV).pg_port)  # the shared services run on


def test_a_clone_deleted_without_clean_leaves_nothing_to_the_next_clone_at_its_path(private):
    checkout = new_checkout(private / "clone")
    started = checkout.services("start", "pg")
    assert started.returncode == 0, started.stderr
    (data,) = checkout.service_dirs()
    old_pid = (data / "pg" / "data" / "postmaster.pid").read_text().split()[0]
    conn = psycopg2.connect(
        host="127.0.0.1",
        port=checkout.pg_port,
        dbname="crontabber",
        user="crontabber",
        password="crontabber",
    )
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE left_by_the_old_clone")
    conn.close()

    shutil.rmtree(checkout.root)  # rm -rf clone, its server still running
    checkout = new_checkout(checkout.root)  # git clone again at the same path
    started = checkout.services("start", "pg")
    assert started.returncode == 0, started.stderr
    assert "earlier checkout" in started.stderr
    assert not alive(old_pid)
    assert checkout.service_dirs() == [data]
    conn = psycopg2.connect(
        host="127.0.0.1",
        port=checkout.pg_port,
        dbname="crontabber",
        user="crontabber",
        password="crontabber",
    )
    with conn.cursor() as cur:
        cur.execute("SELECT datname FROM pg_database WHERE datname = 'left_by_the_old_clone'")
        assert cur.fetchall() == []  # a fresh cluster
    conn.close()


def test_pgbouncer_runs_in_front_of_the_checkouts_postgresql_in_transaction_pooling(private):
    """`start pgb` starts PostgreSQL and PgBouncer (Debian's package) in front of it: a login
    through it reaches the checkout's own server, in transaction pooling mode, and SHOW STATS
    (to the crontabber role) counts it; stop and clean take it down with the rest."""
    checkout = new_checkout(private / "clone")
    started = checkout.services("start", "pgb")
    assert started.returncode == 0, started.stderr
    assert (
        f"export SYMBOLS_PGB_PORT={checkout.pgb_port}" in (checkout.state_dir / "env").read_text()
    )
    assert select_one(checkout.pgb_port) == 1
    status = checkout.services("status", "pgb")
    assert status.returncode == 0 and "(transaction pooling)" in status.stdout, status
    stats = devservices.Services({"SYMBOLS_PGB_PORT": str(checkout.pgb_port)}).pgbouncer_stats()
    assert stats["crontabber"]["total_xact_count"] >= 1
    (data,) = checkout.service_dirs()
    config = (data / "pgbouncer" / "pgbouncer.ini").read_text()
    assert "pool_mode = transaction" in config and f"port={checkout.pg_port}" in config
    cleaned = checkout.services("clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not answers(checkout.pgb_port) and not data.exists()


def test_a_worktree_linking_the_state_dir_reaches_the_checkouts_services(private):
    """A git worktree whose ``.services`` is a link to the main checkout's (the engineers'
    worktrees are made so) reaches that checkout's services, not new ones of its own (a
    ``start pgs`` there tried a second PostgreSQL); naming ``pgb`` there, not ``pg``, leaves
    the running server's ``--fast`` settings alone (they were rewritten without it)."""
    checkout = new_checkout(private / "main")
    started = checkout.services("start", "pg")
    assert started.returncode == 0, started.stderr
    before = service_dirs()
    root = private / "wt-deploy"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "services.sh", root / "scripts")
    (root / ".services").symlink_to(checkout.state_dir)
    worktree = Checkout(root, checkout.pg_port)
    status = worktree.services("status", "pg")
    assert "pg: running" in status.stdout and "(fast: fsync=off)" in status.stdout, status
    started = worktree.services("start", "pgb", fast=False)
    assert started.returncode == 0, started.stderr
    assert select_one(worktree.pgb_port) == 1
    assert service_dirs() == before  # the checkout's, no other
    status = checkout.services("status", "pg")
    assert "(fast: fsync=off)" in status.stdout, status.stdout
