"""The local services for benchmarks: a database's settings, a fresh database, s3proxy's pid
and a process's CPU time. Addresses and places come from :mod:`devservices`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import devservices
from crontabber.config.database import DatabaseSettings
from crontabber.store import connect


def database(dbname: str, env: Mapping[str, str] = os.environ) -> DatabaseSettings:
    """The local PostgreSQL's database ``dbname`` (tests/conftest.py uses it too)."""
    where = devservices.Services(env).database(dbname)
    return DatabaseSettings(**where)


def fresh_database(dbname: str) -> DatabaseSettings:
    """Drop and create ``dbname``; return its settings."""
    conn = connect(database("postgres"))
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")
        cur.execute(f"CREATE DATABASE {dbname}")
    conn.close()
    return database(dbname)


def cpu_seconds(pid: int | str) -> float:
    """User + system CPU seconds of a process so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def s3proxy_pid() -> int | None:
    """The local s3proxy's pid (scripts/services.sh writes it), or None."""
    try:
        return int(devservices.current().s3proxy_pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
