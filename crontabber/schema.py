"""Apply ``sql/schema.sql`` and the numbered migrations in ``sql/migrations/``.

The convention (``sql/migrations/README.md``): a database without
``schema_migrations`` gets ``schema.sql`` and every migration is recorded as
applied; otherwise each unrecorded migration runs, in order. An advisory lock
makes runners that start at the same moment do this once.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, NamedTuple, Union

from . import queries

logger = logging.getLogger(__name__)

_MIGRATION = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


# A directory: a str or a pathlib.Path (tests pass tmp_path); os.path, not
# pathlib, because every cron tick runs ensure_schema (see queries.SQL_DIR).
SqlDir = Union[str, "os.PathLike[str]"]


class Migration(NamedTuple):
    number: int
    name: str
    path: str


def migrations(sql_dir: SqlDir = queries.SQL_DIR) -> list[Migration]:
    """The migration files in number order.

    Raises:
        ValueError: on a badly named file or a duplicated number.
    """
    found: dict[int, Migration] = {}
    directory = os.path.join(sql_dir, "migrations")
    for filename in sorted(f for f in os.listdir(directory) if f.endswith(".sql")):
        match = _MIGRATION.match(filename)
        if not match:
            raise ValueError(f"migration file {filename!r} is not named NNNN_name.sql")
        number = int(match.group(1))
        if number in found:
            raise ValueError(f"two migrations numbered {number}: {found[number].name}, {filename}")
        found[number] = Migration(number, filename[:-len(".sql")], os.path.join(directory, filename))
    return [found[number] for number in sorted(found)]


def ensure_schema(connection: Any, sql_dir: SqlDir = queries.SQL_DIR) -> list[str]:
    """Bring the database to the current schema; return what was applied.

    Cheap when nothing is to do (every cron tick calls it): one query, no lock.
    """
    q = queries.load("schema_migrations.sql")
    wanted = {m.number for m in migrations(sql_dir)}
    if _recorded(connection, q["recorded"]) >= wanted:
        return []
    applied: list[str] = []
    with connection, connection.cursor() as cur:
        cur.execute(q["lock"])
        cur.execute(q["has_table"])
        fresh = not cur.fetchone()[0]
        cur.execute(q["create_table"])
        cur.execute(q["applied"])
        done = {row[0] for row in cur.fetchall()}
        if fresh:
            cur.execute(_sql_text(os.path.join(sql_dir, "schema.sql")))
            applied.append("schema.sql")
        for migration in migrations(sql_dir):
            if migration.number in done:
                continue
            if not fresh:
                cur.execute(_sql_text(migration.path))
                applied.append(migration.name)
            cur.execute(q["record"], {"number": migration.number, "name": migration.name})
    if applied:
        logger.info("database schema: applied %s", ", ".join(applied))
    return applied


def _recorded(connection: Any, query: str) -> set[int]:
    """The recorded migration numbers (empty when there is no schema_migrations table).

    Compared as a set, so a migration numbered below one already applied
    (merged from another branch) is still noticed and applied.
    """
    try:
        with connection, connection.cursor() as cur:
            cur.execute(query)
            return set(cur.fetchone()[0] or ())
    except Exception as exc:  # UndefinedTable, without importing psycopg2 here
        if getattr(exc, "pgcode", None) == "42P01":
            return set()
        raise


def apply_migrations_only(connection: Any, sql_dir: SqlDir = queries.SQL_DIR) -> None:
    """Build the schema from the migrations alone (for the schema-vs-migrations test)."""
    with connection, connection.cursor() as cur:
        for migration in migrations(sql_dir):
            cur.execute(_sql_text(migration.path))


def _sql_text(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read()
