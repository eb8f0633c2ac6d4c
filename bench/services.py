"""Connection settings of the local services for benchmarks (from the environment
that ``make`` exports out of ``.services/env``; defaults match scripts/services.sh)."""

from __future__ import annotations

import os
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
