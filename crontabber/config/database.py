"""The options that say where a PostgreSQL database is, and the settings they make.

One list serves the runner's state database (``crontabber.host`` ..., defaults from
``resource.postgresql``) and each job's ``database`` namespace (``@using_postgres()``):
``host`` and ``port`` in libpq's multi-host form, ``target_session_attrs`` (``read-write``
for a primary with standbys), or a whole ``dsn``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..errors import ConfigurationError
from ..store import DatabaseSettings, parse_ports

#: (name, default, doc, parser or None): the options of a database.
DATABASE_OPTIONS: tuple[tuple[str, Any, str, Callable[[str], Any] | None], ...] = (
    ("host", "localhost", "database host; several, comma-separated, for a primary and its "
     "standbys (libpq tries each: see target_session_attrs)", None),
    ("port", 5432, "database port; a comma list gives one per host", parse_ports),
    ("dbname", "crontabber", "database name", None),
    ("user", "", "database user", None),
    ("password", "", "database password (use the environment)", None),
    ("target_session_attrs", "", "libpq's: read-write (or primary) takes, of the hosts listed, the "
     "one that accepts writes (the primary, a promoted standby too); empty: libpq's default",
     None),
    ("dsn", "", "a whole libpq connection string or URI instead of host, port, dbname and "
     "user (password and target_session_attrs are added when set)", None),
)

#: The values of libpq's ``target_session_attrs`` that can reach a server taking writes (the
#: runner and the jobs write; a standby is refused at login: crontabber.store.connect).
SESSION_ATTRS = ("", "any", "read-write", "primary")


def database_settings(values: Mapping[str, Any], namespace: str) -> DatabaseSettings:
    """The settings of the options ``values`` (by name) of namespace ``namespace``.

    Raises:
        ConfigurationError: a value libpq would refuse, naming the option.
    """
    attrs = str(values.get("target_session_attrs") or "")
    if attrs not in SESSION_ATTRS:
        raise ConfigurationError(f"{namespace}.target_session_attrs",
                                 f"{attrs!r} is not one of {', '.join(SESSION_ATTRS[1:])}")
    try:
        return DatabaseSettings(
            host=str(values["host"]), port=values["port"], dbname=str(values["dbname"]),
            user=str(values["user"]), password=str(values["password"]),
            target_session_attrs=attrs, dsn=str(values.get("dsn") or ""))
    except ValueError as exc:
        option = "dsn" if values.get("dsn") else "port"
        raise ConfigurationError(f"{namespace}.{option}", str(exc)) from None
