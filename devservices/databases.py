"""The local PostgreSQL's databases as the runner's settings: one by name, or a new empty
one. Tests, benchmarks and the fault runs share them (``bench.services`` re-exports them);
addresses come from :class:`devservices.Services`."""

from __future__ import annotations

import os
from typing import Mapping

from crontabber.config.database import DatabaseSettings
from crontabber.store import connect
from devservices import Services


def database(dbname: str, env: Mapping[str, str] = os.environ) -> DatabaseSettings:
    """The local PostgreSQL's database ``dbname`` (it need not exist yet)."""
    return DatabaseSettings(**Services(env).database(dbname))


def fresh_database(dbname: str) -> DatabaseSettings:
    """Drop and create ``dbname`` (empty); return its settings."""
    conn = connect(database("postgres"))
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")
        cur.execute(f"CREATE DATABASE {dbname}")
    conn.close()
    return database(dbname)
