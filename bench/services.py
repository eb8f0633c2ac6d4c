"""Connection settings of the local services for benchmarks (from the environment
that ``make`` exports out of ``.services/env``; defaults match scripts/services.sh)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from crontabber.store import DatabaseSettings, connect


def database(dbname: str, env: Mapping[str, str] = os.environ) -> DatabaseSettings:
    """The local PostgreSQL's database ``dbname`` (tests/conftest.py uses it too)."""
    return DatabaseSettings(
        host=env.get("RESOURCE_POSTGRESQL_HOST", "127.0.0.1"),
        port=int(env.get("RESOURCE_POSTGRESQL_PORT", "54329")),
        dbname=dbname,
        user=env.get("RESOURCE_POSTGRESQL_USER", "crontabber"),
        password=env.get("RESOURCE_POSTGRESQL_PASSWORD", "crontabber"),
    )


def fresh_database(dbname: str) -> DatabaseSettings:
    """Drop and create ``dbname``; return its settings."""
    conn = connect(database("postgres"))
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")
        cur.execute(f"CREATE DATABASE {dbname}")
    conn.close()
    return database(dbname)


STATE = Path(os.environ.get("SYMBOLS_STATE_DIR",
                            Path(__file__).resolve().parent.parent / ".services"))


def cpu_seconds(pid: int | str) -> float:
    """User + system CPU seconds of a process so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def s3proxy_pid() -> int | None:
    """The local s3proxy's pid (scripts/services.sh writes it), or None."""
    try:
        return int((STATE / "s3" / "run" / "s3proxy.pid").read_text().strip())
    except (OSError, ValueError):
        return None
