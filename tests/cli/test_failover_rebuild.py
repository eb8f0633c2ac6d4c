"""The failover runbook's step 4 (docs/deploy.md, "PostgreSQL: a primary and a standby"):
after the standby was promoted, the old primary is rebuilt as the new one's standby with the
guide's command (``pg_basebackup ... -R -X stream -C -S db1``), its data directory moved aside
first; it then starts in recovery, the new primary lists it streaming through its slot, and a
write made after the promotion reaches it (the old primary's own last writes do not come
back: its copy is the new primary's). On a primary and a standby of the test's own
(``faults.failover.Pair``: ``scripts/services.sh`` in a state directory of its own, on free
ports), never the shared development server. Over the servers' sockets as ``postgres``, where
the guide says ``-h db2.internal -U replicator``: the same command with the development
cluster's login."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import tempfile
import time

from faults.failover import Pair

PG_BIN = pathlib.Path("/usr/lib/postgresql/15/bin")


def as_postgres(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["runuser", "-u", "postgres", "--", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )


def psql(socket: pathlib.Path, port: int, sql: str) -> str:
    done = as_postgres(
        str(PG_BIN / "psql"), "-X", "-qAt", "-h", str(socket), "-p", str(port), "-U", "postgres",
        "-d", "postgres", "-c", sql,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def until(check, seconds: float = 60) -> None:  # noqa: ANN001
    """Poll ``check`` (an order of events: no wall time is asserted)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.2)


def test_the_old_primary_is_rebuilt_as_the_new_standby_by_the_guides_command():
    with tempfile.TemporaryDirectory(prefix="rebuild-") as tmp:
        pathlib.Path(tmp).chmod(0o755)
        pair = Pair(pathlib.Path(tmp) / "state", "async")
        rebuilt_data = None
        try:
            pair.start()
            pg, pgs = pair.service_dir / "pg", pair.service_dir / "pgs"
            old, new = (pg / "run", pair.primary), (pgs / "run", pair.standby)
            psql(*old, "CREATE TABLE rebuild_check (n int); INSERT INTO rebuild_check VALUES (1)")
            until(lambda: psql(*new, "SELECT count(*) FROM pg_class WHERE relname ="
                               " 'rebuild_check'") == "1")  # fmt: skip
            # steps 1-3's part here: the primary dies, the standby is promoted and takes writes
            pair.kill_primary()
            assert psql(*new, "SELECT pg_promote()") == "t"
            until(lambda: psql(*new, "SELECT pg_is_in_recovery()") == "f")
            psql(*new, "INSERT INTO rebuild_check VALUES (2)")

            # step 4: the old primary's data moved aside, then the guide's pg_basebackup
            rebuilt_data = pg / "data"
            shutil.move(str(rebuilt_data), str(pg / "data.old"))
            subprocess.run(
                ["install", "-d", "-o", "postgres", "-g", "postgres", "-m", "700", rebuilt_data],
                check=True,
            )  # an empty directory the postgres user owns (the guide's is the package's)
            done = as_postgres(
                str(PG_BIN / "pg_basebackup"), "-h", str(new[0]), "-p", str(new[1]), "-U",
                "postgres", "-D", str(rebuilt_data), "-R", "-X", "stream", "-C", "-S", "db1",
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            # the copy carries the new primary's own port and socket: this server's instead
            conf = rebuilt_data / "symbols.conf"
            kept = [ln for ln in conf.read_text().splitlines()
                    if not ln.startswith(("port", "unix_socket_directories"))]  # fmt: skip
            conf.write_text("\n".join([*kept, f"port = {old[1]}",
                                       f"unix_socket_directories = '{old[0]}'", ""]))  # fmt: skip
            started = as_postgres(
                str(PG_BIN / "pg_ctl"), "-D", str(rebuilt_data),
                "-l", str(pg / "logs" / "rebuilt.log"), "-w", "-t", "90", "-s", "start",
            )  # fmt: skip
            assert started.returncode == 0, started.stderr

            assert psql(*old, "SELECT pg_is_in_recovery()") == "t"
            until(lambda: psql(*new, "SELECT active FROM pg_replication_slots"
                               " WHERE slot_name = 'db1'") == "t")  # fmt: skip
            until(lambda: psql(*new, "SELECT state FROM pg_stat_replication") == "streaming")
            until(lambda: psql(*old, "SELECT string_agg(n::text, ',' ORDER BY n)"
                               " FROM rebuild_check") == "1,2")  # fmt: skip
        finally:
            if rebuilt_data is not None and (rebuilt_data / "postmaster.pid").exists():
                as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(rebuilt_data), "-m", "immediate",
                            "-s", "stop")  # fmt: skip
            pair.clean()
