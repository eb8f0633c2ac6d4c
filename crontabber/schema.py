"""Apply schemas: a schema is a directory with ``schema.sql`` and ``migrations/``.

The runner's is ``sql/crontabber`` (:data:`crontabber.sqlfiles.SQL_DIR`); the symbol
server's jobs bring theirs (``sql/jobs``, named by a job class's ``schema_dir``). The
convention (``sql/README.md``): migration numbers are one sequence
over every schema, recorded in ``schema_migrations``. A database without that table gets
each wanted schema's ``schema.sql`` and every number recorded; otherwise a schema none of
whose numbers is recorded gets its ``schema.sql``, and each other unrecorded migration
runs, in number order. An advisory lock makes runners that start at the same moment do
this once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re

from . import sqlfiles
from .connection import round_trip_cursor as round_trip_cursor
from .errors import SchemaNeedsOwner
from .frozen import Frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence, TypeAlias

logger = logging.getLogger(__name__)

_MIGRATION = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


# A directory: a str or a pathlib.Path (tests pass tmp_path); os.path, not
# pathlib, because every cron tick runs ensure_schema (see sqlfiles.SQL_DIR).
SqlDir: TypeAlias = "str | os.PathLike[str]"

#: The runner's own schema: every runner applies it.
RUNNER: tuple[SqlDir, ...] = (sqlfiles.SQL_DIR,)


class Migration(Frozen):
    """One migration file: its number, its name (the file name without ``.sql``), its path."""

    number: int
    name: str
    path: str


class Applied(list[str]):
    """What :func:`ensure_schema` applied (``crontabber/schema.sql``, ``0012_run_ledger``...),
    and ``unknown``: the migrations recorded in the database, of the schemas this code loads,
    that this code does not have. Not empty: the database is newer than this code (a newer
    release migrated it), which may read but must claim no job
    (:class:`crontabber.errors.CodeOlderThanSchema`)."""

    def __init__(self, applied: Sequence[str] = (), unknown: Sequence[int] = ()) -> None:
        super().__init__(applied)
        self.unknown: tuple[int, ...] = tuple(unknown)


def migrations(*sql_dirs: SqlDir) -> list[Migration]:
    """The migration files of the schemas ``sql_dirs`` (the runner's when none is given),
    in number order.

    Raises:
        ValueError: on a badly named file or a number used twice (in one schema or two).
    """
    return _merged([_listed(sql_dir) for sql_dir in sql_dirs or RUNNER])


def _listed(sql_dir: SqlDir) -> list[Migration]:
    """One schema's migration files (any order)."""
    directory = os.path.join(sql_dir, "migrations")
    found = []
    for filename in sorted(f for f in os.listdir(directory) if f.endswith(".sql")):
        match = _MIGRATION.match(filename)
        if not match:
            raise ValueError(f"migration file {filename!r} is not named NNNN_name.sql")
        found.append(
            Migration(
                int(match.group(1)), filename[: -len(".sql")], os.path.join(directory, filename)
            )
        )
    return found


def _merged(schemas: Sequence[list[Migration]]) -> list[Migration]:
    """The migrations of ``schemas`` in number order.

    Raises:
        ValueError: a number used twice (in one schema or two).
    """
    found: dict[int, Migration] = {}
    for migration in (m for listed in schemas for m in listed):
        if migration.number in found:
            raise ValueError(
                f"two migrations numbered {migration.number}: {found[migration.number].name}, "
                f"{migration.name}"
            )
        found[migration.number] = migration
    return [found[number] for number in sorted(found)]


def with_runner(sql_dirs: Sequence[SqlDir]) -> tuple[SqlDir, ...]:
    """The runner's schema, then each of ``sql_dirs`` once, in order."""
    wanted: list[SqlDir] = list(RUNNER)
    for sql_dir in sql_dirs:
        if os.fspath(sql_dir) not in (os.fspath(d) for d in wanted):
            wanted.append(sql_dir)
    return tuple(wanted)


def ensure_schema(connection: Any, sql_dirs: Sequence[SqlDir] = RUNNER) -> Applied:
    """Bring the database to the current schemas ``sql_dirs`` (the runner's alone by
    default; give it first); return what was applied (``crontabber/schema.sql``,
    ``0012_run_ledger``...) and the migrations of those schemas the database has and this
    code does not (:class:`Applied`).

    Cheap when nothing is to do (every cron tick calls it): one query, no lock. What the
    schema says while applying (``RAISE NOTICE``: a group role it may not create) is logged,
    one WARNING line each; PostgreSQL's own ``IF [NOT] EXISTS, skipping`` notices are not.

    Raises:
        SchemaNeedsOwner: this login may not apply what is missing (a runner login): names
            what is missing and whose login applies it.
    """
    q = sqlfiles.load("schema_migrations.sql")
    by_dir = {sql_dir: _listed(sql_dir) for sql_dir in sql_dirs}  # one listing each, per tick
    wanted = {m.number for m in _merged(list(by_dir.values()))}  # refuses a number used twice
    recorded = _recorded(connection, q["recorded"])
    labels = {_label(sql_dir) for sql_dir in sql_dirs}
    unknown = sorted(
        number for number, schema in recorded.items() if schema in labels and number not in wanted
    )
    if set(recorded) >= wanted:
        return Applied((), unknown)
    heard = len(connection.notices)
    try:
        applied = _apply(connection, q, by_dir)
    except Exception as exc:  # InsufficientPrivilege, without importing psycopg2 here
        if getattr(exc, "pgcode", None) != _INSUFFICIENT_PRIVILEGE:
            raise
        refusal = _needs_owner(connection, q["owner"], by_dir, recorded)
        if refusal is None:  # refused to the owner itself: the server's own words
            raise
        raise refusal from None
    for notice in connection.notices[heard:]:  # the roles' NOTICE (docs/deploy.md#roles)
        said = " ".join(notice.split())
        if not said.endswith(", skipping"):  # PostgreSQL's own IF [NOT] EXISTS: nothing to do
            logger.warning("database schema: %s", said)
    if applied:
        logger.info("database schema: applied %s", ", ".join(applied))
    return Applied(applied, unknown)


#: SQLSTATE 42501: the login may not (create in the schema, alter a table it does not own).
_INSUFFICIENT_PRIVILEGE = "42501"


def _needs_owner(
    connection: Any, query: str, by_dir: dict[SqlDir, list[Migration]], recorded: Any
) -> SchemaNeedsOwner | None:
    """The refusal of a login that may not apply what is missing: what is missing (a
    schema new to the database: its ``schema.sql``; else each migration not recorded) and
    whose login may apply it; None when this login is that owner (a statement that needs
    more than the owner has, a superuser's right)."""
    pending: list[str] = []
    for sql_dir, found in by_dir.items():
        if not set(recorded) & {m.number for m in found}:
            pending.append(f"{_label(sql_dir)}/schema.sql")
        else:
            pending += [m.name for m in found if m.number not in recorded]
    info = connection.info
    login, owner = info.user, None
    with contextlib.suppress(Exception):  # the refusal matters more than the owner's name
        with round_trip_cursor(connection) as cur:
            cur.execute(query)
            login, owner = cur.fetchone()
    if owner is not None and owner == login:
        return None
    target = f"{info.user}@{info.host}:{info.port}/{info.dbname}"
    return SchemaNeedsOwner(target, tuple(pending), login, owner)


def _apply(connection: Any, q: Any, by_dir: dict[SqlDir, list[Migration]]) -> list[str]:
    """Apply what is missing under the schema lock, in one transaction: each schema new to
    the database (its ``schema.sql``, its migrations recorded), then the other unrecorded
    migrations in number order. Returns what was applied."""
    applied: list[str] = []
    with connection, connection.cursor() as cur:
        cur.execute(q["lock"])
        cur.execute(q["has_table"])
        fresh = not cur.fetchone()[0]
        cur.execute(q["create_table"])
        cur.execute(q["applied"])
        done = {row[0] for row in cur.fetchall()}
        replay: list[tuple[Migration, str]] = []
        for sql_dir, found in by_dir.items():
            if fresh or not done & {m.number for m in found}:  # new to this database
                cur.execute(_sql_text(os.path.join(sql_dir, "schema.sql")))
                applied.append(f"{_label(sql_dir)}/schema.sql")
                for migration in found:
                    cur.execute(
                        q["record"],
                        {
                            "number": migration.number,
                            "name": migration.name,
                            "schema": _label(sql_dir),
                        },
                    )
            else:
                replay += [(m, _label(sql_dir)) for m in found if m.number not in done]
        for migration, schema in sorted(replay, key=lambda replayed: replayed[0].number):
            cur.execute(_sql_text(migration.path))
            applied.append(migration.name)
            cur.execute(
                q["record"], {"number": migration.number, "name": migration.name, "schema": schema}
            )
    return applied


def _label(sql_dir: SqlDir) -> str:
    """``crontabber`` for ``sql/crontabber`` (and for an older layout's ``crontabber/sql``):
    the part of the project a schema belongs to, as ``schema_migrations`` records it."""
    path = os.path.normpath(os.fspath(sql_dir))
    parent, name = os.path.split(path)
    return os.path.basename(parent) if name == "sql" else name


def _recorded(connection: Any, query: str) -> dict[int, str | None]:
    """The recorded migration numbers and the schema each belongs to (None: recorded by code
    from before the schema was recorded); empty when there is no schema_migrations table.

    Compared as a set, so a migration numbered below one already applied
    (merged from another branch) is still noticed and applied.
    """
    try:
        with round_trip_cursor(connection) as cur:  # every tick: one round trip
            cur.execute(query)
            numbers, schemas = cur.fetchone()
            return dict(zip(numbers or (), schemas or ()))
    except Exception as exc:  # UndefinedTable, without importing psycopg2 here
        if getattr(exc, "pgcode", None) == "42P01":
            return {}
        raise


def apply_migrations_only(connection: Any, sql_dirs: Sequence[SqlDir] = RUNNER) -> None:
    """Build the schemas from their migrations alone, in number order (for the
    schema-vs-migrations test)."""
    with connection, connection.cursor() as cur:
        for migration in migrations(*sql_dirs):
            cur.execute(_sql_text(migration.path))


def _sql_text(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read()
