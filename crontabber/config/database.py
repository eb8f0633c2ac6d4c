"""Where a PostgreSQL database is: its options, and the settings they make
(:class:`DatabaseSettings`, which :mod:`crontabber.store` connects with).

One list serves the runner's state database (``crontabber.host`` ..., defaults from
``resource.postgresql``) and each job's ``database`` namespace (``@using_postgres()``):
``host`` and ``port`` in libpq's multi-host form, ``target_session_attrs`` (``read-write``
for a primary with standbys), or a whole ``dsn``.
"""

from __future__ import annotations

from ..errors import ConfigurationError
from ..frozen import Frozen, setfield

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping


def parse_ports(text: str) -> int | str:
    """A ``port`` option: one port, or libpq's comma list (one per host of a multi-host
    ``host``, or one for all).

    Raises:
        ValueError: a part that is not a port number.
    """
    parts = [part.strip() for part in str(text).split(",")]
    for part in parts:
        if not part.isdigit() or not 0 < int(part) < 65536:
            raise ValueError(f"not a port number: {part!r} (one port, or a comma list)")
    return int(parts[0]) if len(parts) == 1 else ",".join(parts)


class DatabaseSettings(Frozen):
    """Where a PostgreSQL database is; the password is never printed.

    ``host`` and ``port`` take libpq's multi-host form (``db1,db2`` and ``5432`` or
    ``5432,5433``): libpq tries each in turn, and with ``target_session_attrs = read-write``
    takes the one that accepts writes (the primary, after a standby's promotion too).
    ``dsn``, when set, is a whole libpq connection string or URI and ``host``, ``port``,
    ``dbname`` and ``user`` are not used; ``password`` and ``target_session_attrs``, when
    set, are added to it.
    """

    host: str
    port: int | str
    dbname: str
    user: str
    password: str
    target_session_attrs: str
    dsn: str

    def __init__(
        self,
        host: str = "localhost",
        port: int | str = 5432,
        dbname: str = "crontabber",
        user: str = "",
        password: str = "",
        target_session_attrs: str = "",
        dsn: str = "",
    ) -> None:
        """Raises ValueError: a ``port`` list that does not match ``host``'s, or a bad ``dsn``."""
        setfield(self, "host", host)
        setfield(self, "port", port)
        setfield(self, "dbname", dbname)
        setfield(self, "user", user)
        setfield(self, "password", password)
        setfield(self, "target_session_attrs", target_session_attrs)
        setfield(self, "dsn", dsn)
        hosts, ports = self.host.split(","), str(self.port).split(",")
        if not self.dsn and len(ports) not in (1, len(hosts)):
            raise ValueError(f"{len(ports)} ports for {len(hosts)} hosts (one, or one per host)")
        if self.dsn:
            _parsed_dsn(self.dsn)

    def __repr__(self) -> str:
        return f"DatabaseSettings({self.target})"

    @property
    def target(self) -> str:
        """``user@host:port/dbname`` (hosts and ports as given): safe to print and log."""
        if self.dsn:
            parts = _parsed_dsn(self.dsn)
            user, host = parts.get("user", ""), parts.get("host", "")
            return f"{user}@{host}:{parts.get('port', '')}/{parts.get('dbname', '')}"
        return f"{self.user}@{self.host}:{self.port}/{self.dbname}"

    def libpq(self) -> dict[str, Any]:
        """The keywords of :func:`psycopg2.connect` (an unset one is libpq's default or its
        environment's, e.g. ``PGTARGETSESSIONATTRS``)."""
        given = {
            "password": self.password or None,
            "target_session_attrs": self.target_session_attrs or None,
        }
        if self.dsn:
            return {"dsn": self.dsn, **{k: v for k, v in given.items() if v is not None}}
        return {
            "host": self.host,
            "port": self.port,
            "dbname": self.dbname,
            "user": self.user or None,
            **given,
        }


def _parsed_dsn(dsn: str) -> dict[str, str]:
    """A libpq connection string or URI's parts.

    Raises:
        ValueError: libpq cannot parse it (the message never repeats the string, which may
            hold a password).
    """
    from psycopg2 import ProgrammingError
    from psycopg2.extensions import parse_dsn

    try:
        return dict(parse_dsn(dsn))
    except ProgrammingError:
        raise ValueError(
            "not a libpq connection string (key=value ...) or URI (postgresql://...)"
        ) from None


#: (name, default, doc, parser or None): the options of a database.
DATABASE_OPTIONS: tuple[tuple[str, Any, str, Callable[[str], Any] | None], ...] = (
    (
        "host",
        "localhost",
        "database host; several, comma-separated, for a primary and its "
        "standbys (libpq tries each: see target_session_attrs)",
        None,
    ),
    ("port", 5432, "database port; a comma list gives one per host", parse_ports),
    ("dbname", "crontabber", "database name", None),
    ("user", "", "database user", None),
    ("password", "", "database password (use the environment)", None),
    (
        "target_session_attrs",
        "",
        "libpq's: read-write (or primary) takes, of the hosts listed, the "
        "one that accepts writes (the primary, a promoted standby too); empty: libpq's default",
        None,
    ),
    (
        "dsn",
        "",
        "a whole libpq connection string or URI instead of host, port, dbname and "
        "user (password and target_session_attrs are added when set)",
        None,
    ),
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
        raise ConfigurationError(
            f"{namespace}.target_session_attrs",
            f"{attrs!r} is not one of {', '.join(SESSION_ATTRS[1:])}",
        )
    try:
        return DatabaseSettings(
            host=str(values["host"]),
            port=values["port"],
            dbname=str(values["dbname"]),
            user=str(values["user"]),
            password=str(values["password"]),
            target_session_attrs=attrs,
            dsn=str(values.get("dsn") or ""),
        )
    except ValueError as exc:
        option = "dsn" if values.get("dsn") else "port"
        raise ConfigurationError(f"{namespace}.{option}", str(exc)) from None
