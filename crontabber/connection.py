"""The state database's connection, as every store runs over it: :func:`connect` (a server
that takes writes, or a clear error), the driver errors' translation (:func:`translated`: a
lost connection reopened and the call made once more, a refused privilege, a lock wait that
timed out) and :class:`StoreConnection`, the connection :class:`crontabber.store.StateStore`
and the stores it lends it to (:meth:`StoreConnection.in_transaction`,
:meth:`StoreConnection.alone`) run their queries over.

Driver errors are translated here and never escape: a lost or refused connection becomes
:class:`DatabaseUnavailable`, a server that no longer takes writes :class:`DatabaseReadOnly`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging

import psycopg2
import psycopg2.errors

from . import sqlfiles
from .config.database import DatabaseSettings
from .errors import DatabaseReadOnly, DatabaseUnavailable, LockWaitTimedOut, NotPermitted
from .failures import first_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Concatenate, Iterator, Mapping, ParamSpec, Sequence, TypeVar

    R = TypeVar("R")
    P = ParamSpec("P")
    S = TypeVar("S", bound="StoreConnection")

logger = logging.getLogger(__name__)

Q = sqlfiles.load("crontabber.sql")


def connect(db: DatabaseSettings, application_name: str = "crontabber") -> Any:
    """Open a psycopg2 connection to a server that accepts writes.

    Nothing is set on the session: no startup ``options`` (PgBouncer before 1.20 refuses
    them), no ``SET``, so the connection works through a transaction pooler. Nothing needs
    the session's time zone either: every stored time is ``timestamptz``, SQL that takes
    a day names its zone (``AT TIME ZONE 'UTC'``), and every time is rendered in UTC by
    :mod:`crontabber.formats`, whatever zone the server's sessions use.

    Raises:
        DatabaseUnavailable: when the server cannot be reached or refuses the login.
        DatabaseReadOnly: the server reached is a read-only standby (told by the server's
            own report at login, ``in_hot_standby``: no round trip).
    """
    try:
        conn = psycopg2.connect(**db.libpq(), application_name=application_name, connect_timeout=10)
    except psycopg2.OperationalError as exc:
        raise DatabaseUnavailable(db.target, first_line(exc)) from None
    if _read_only(conn):
        server, behind = f"{conn.info.host}:{conn.info.port}", server_behind(conn)
        conn.close()
        raise DatabaseReadOnly(db.target, server, behind)
    return conn


def server_behind(conn: Any) -> str | None:
    """``host:port`` of the server when it is not where ``conn`` connected (a pooler such as
    PgBouncer, or a proxy, in between: the server's own address and port differ from the
    connection's), or None: no pooler seen (or a Unix socket, or the question failed). One
    round trip: asked only of a read-only server, to name the fix that applies."""
    try:
        conn.rollback()  # after a refused write: its transaction is aborted
        with conn.cursor() as cur:
            cur.execute("SELECT host(inet_server_addr()), inet_server_port()")
            address, port = cur.fetchone()
        conn.rollback()
    except psycopg2.Error:
        return None
    if port is None:  # a Unix socket
        return None
    here = str(conn.info.host)
    moved = str(port) != str(conn.info.port) or (_is_address(here) and here != address)
    return f"{address}:{port}" if moved else None


def _is_address(host: str) -> bool:
    """Whether ``host`` is an IP address (a name may resolve to the server's address)."""
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _read_only(conn: Any) -> bool:
    """Whether the server said at login that it takes no writes (PostgreSQL 14+ reports it)."""
    return "on" in (
        conn.info.parameter_status("in_hot_standby"),
        conn.info.parameter_status("default_transaction_read_only"),
    )


def _as_dict(cursor: Any, row: tuple[Any, ...]) -> dict[str, Any]:
    """A row as ``{column: value}`` (psycopg2.extras costs a tick ~2 ms to import)."""
    return {column.name: value for column, value in zip(cursor.description, row)}


def first_row(cursor: Any) -> dict[str, Any] | None:
    """The first row of the statement ``cursor`` ran, as ``{column: value}``; None when none."""
    row = cursor.fetchone()
    return _as_dict(cursor, row) if row is not None else None


def rows_of(cursor: Any) -> list[dict[str, Any]]:
    """The rows of the statement ``cursor`` ran, each as ``{column: value}`` ([] when it
    returns none)."""
    return [_as_dict(cursor, row) for row in cursor.fetchall()] if cursor.description else []


@contextlib.contextmanager
def round_trip_cursor(connection: Any, cursor: Callable[[], Any] | None = None) -> Iterator[Any]:
    """A cursor each ``execute`` of which is its own transaction, sent in one round trip:
    one statement, or several in one query string (PostgreSQL runs them as one implicit
    transaction block, where ``SET LOCAL`` holds). psycopg2's transaction (``with
    connection``) sends a ``BEGIN`` and a ``COMMIT`` more: on an idle cron tick they were 6
    of its 10 round trips (issue #36). A connection in a transaction already (or in
    autocommit) gets that transaction's form, which commits it, as before. ``cursor``: what
    makes the cursor (``connection.cursor``).
    """
    make = cursor or connection.cursor
    if connection.autocommit or connection.info.transaction_status != _IDLE:
        with connection, make() as cur:
            yield cur
        return
    connection.autocommit = True
    try:
        with make() as cur:
            yield cur
    finally:
        # a connection the statement lost is closed: setting it would raise "connection
        # already closed" over the server's (or PgBouncer's) own error
        if not connection.closed:
            connection.autocommit = False


#: psycopg2.extensions.TRANSACTION_STATUS_IDLE (libpq's PQTRANS_IDLE): not in a transaction.
_IDLE = 0


def lost_cause(exc: Exception) -> Exception:
    """The error that lost a connection: psycopg2 raises "connection already closed" when a
    ``with connection`` block ends on a connection its statement lost (the rollback meets it
    closed), over the server's (or PgBouncer's) own error, which is its ``__context__``."""
    context = exc.__context__
    if isinstance(exc, psycopg2.InterfaceError) and isinstance(context, psycopg2.Error):
        return context
    return exc


def translated(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], R]:
    """Decorate a store method: a lost connection, or one to a server that no longer takes
    writes (a primary demoted to a standby), is reopened and the call made once more (each
    method is one transaction, so a retry is safe; reopened with a multi-host address and
    ``target_session_attrs = read-write``, the connection finds the promoted primary); if
    that fails too, :class:`DatabaseUnavailable` (:class:`DatabaseReadOnly` for a standby).

    The retry is what lets a job that outlived a database restart or a failover still write
    its outcome and release its ``ongoing`` marker.
    """

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in (1, 2):
            try:
                return method(self, *args, **kwargs)
            except psycopg2.errors.InsufficientPrivilege as exc:
                raise self.not_permitted(method.__name__, exc) from None
            except (
                psycopg2.OperationalError,
                psycopg2.InterfaceError,
                psycopg2.errors.ReadOnlySqlTransaction,
            ) as exc:
                if isinstance(exc, psycopg2.errors.LockNotAvailable):  # (after lock_timeout: 0028)
                    raise self.lock_waited(method.__name__) from None
                if isinstance(exc, psycopg2.errors.ReadOnlySqlTransaction) and self._conn.readonly:
                    # a session read-only on purpose (the dashboard's): never reopened writable
                    raise
                cause = lost_cause(exc)
                # closed before this call (a failed attempt of a caller's retry): no news
                known = cause is exc and isinstance(exc, psycopg2.InterfaceError)
                if attempt == 2 or not self.reconnect():
                    raise self.unavailable(cause) from None
                if not known:  # a login to PgBouncer is no server yet: "trying again", no more
                    logger.warning(
                        "lost the state database connection (%s); trying again on a new one",
                        first_line(cause),
                    )
        raise AssertionError("unreachable")

    return wrapper


#: What each store method that a database role may be refused does, in an operator's words
#: (:class:`NotPermitted`); the others' refusals name the statement's error.
_DOING = {
    "pause": "pause jobs",
    "resume": "resume jobs",
    "reset": "reset jobs",
    "release": "release jobs",
    "mark_success": "mark jobs successful",
    "drain": "drain hosts",
    "undrain": "undrain hosts",
    "mute": "mute alerts",
    "unmute": "unmute alerts",
    "audit": "write the audit trail",
}


class StoreConnection:
    """One connection to the state database, reopened when lost (:func:`translated`), with the
    errors its driver errors mean; :class:`crontabber.store.StateStore`'s base."""

    def __init__(
        self,
        connection: Any,
        db: DatabaseSettings | None = None,
        unknown_migrations: Sequence[int] = (),
    ) -> None:
        self._conn = connection
        self._db = db
        #: The database's migrations (of the schemas this process loads) that this code lacks:
        #: the database is newer than the code, which must claim nothing (ensure_schema).
        self.unknown_migrations = tuple(unknown_migrations)

    def close(self) -> None:
        self._conn.close()

    @property
    def target(self) -> str:
        """Where the state database is (``user@host:port/dbname``), for messages."""
        return self._db.target if self._db is not None else "the state database"

    def reconnect(self) -> bool:
        """Replace a broken connection; False if there is no way to or it fails.

        Raises:
            DatabaseReadOnly: the server reached now is a read-only standby.
        """
        if self._db is None:
            return False
        try:
            self._conn.close()
            self._conn = connect(self._db)
        except DatabaseReadOnly:
            raise
        except (DatabaseUnavailable, psycopg2.Error):
            return False
        return True

    def unavailable(self, exc: Exception) -> DatabaseUnavailable:
        """The error a driver error ``exc`` that could not be retried away means."""
        if isinstance(exc, psycopg2.errors.ReadOnlySqlTransaction):
            try:
                server = f"{self._conn.info.host}:{self._conn.info.port}"
            except psycopg2.Error:
                server = "the server"
            return DatabaseReadOnly(self.target, server, server_behind(self._conn))
        return DatabaseUnavailable(self.target, first_line(exc))

    def lock_waited(self, doing: str) -> LockWaitTimedOut:
        """The error a lock wait that timed out in method ``doing`` means, naming the sessions
        that hold locks on the tables the operator functions lock (looked up in a transaction
        of its own: the failed one was rolled back)."""
        try:
            with self._conn, self._cursor() as cur:
                cur.execute(Q["lock_holders"])
                rows = rows_of(cur)
        except psycopg2.Error:
            rows = []
        holders: dict[int, list[str]] = {}
        for row in rows:
            holders.setdefault(
                row["pid"],
                [f"{row['usename']} (pid {row['pid']}, {row['application_name'] or '-'})"],
            )
            holders[row["pid"]].append(row["on_table"])
        return LockWaitTimedOut(
            _DOING.get(doing, doing.replace("_", " ")),
            tuple(f"{found[0]} on {', '.join(found[1:])}" for found in holders.values()),
        )

    def not_permitted(self, doing: str, exc: Exception) -> NotPermitted:
        """The error a refused privilege (SQLSTATE 42501) in method ``doing`` means: what the
        database user may not do, in an operator's words where the method is an operator's."""
        try:
            user = self._conn.info.user
        except psycopg2.Error:
            user = "this database user"
        if doing in _DOING:
            return NotPermitted(user, _DOING[doing])
        return NotPermitted(user, f"do this ({first_line(exc)})", operators=False)

    def fds(self) -> tuple[int, ...]:
        """File descriptors of the connection (a forked job closes its copies)."""
        try:
            return (self._conn.fileno(),)
        except (psycopg2.Error, AttributeError):
            return ()

    def _cursor(self) -> Any:
        return self._conn.cursor()

    def _own_transactions(self) -> Any:
        """A cursor whose every ``execute`` is one transaction in one round trip
        (:func:`round_trip_cursor`): no ``BEGIN``, ``COMMIT``."""
        return round_trip_cursor(self._conn, self._cursor)

    def _one(self, name: str, params: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        with self._conn, self._cursor() as cur:
            cur.execute(Q[name], params)
            return first_row(cur)

    @translated
    def now(self) -> dt.datetime:
        """The database's clock (``clock_timestamp()``), in UTC."""
        row = self._one("clock")
        assert row is not None
        now: dt.datetime = row["now"]
        return now

    @translated
    def in_transaction(self, work: Callable[[Any], R], doing: str = "") -> R:
        """``work(cursor)`` as one transaction on this store's connection, retried as every
        method here is (:func:`translated`): what :class:`crontabber.alerts.store.AlertStore`,
        :class:`crontabber.reruns.store.RerunStore` and :class:`crontabber.audit_store.AuditStore`
        run their queries with, over the same connection. ``doing``: the work's name for
        :class:`NotPermitted` (``"mute"``...).

        Raises:
            NotPermitted: the database user may not do it.
        """
        try:
            with self._conn, self._cursor() as cur:
                return work(cur)
        except psycopg2.errors.InsufficientPrivilege as exc:
            raise self.not_permitted(doing, exc) from None
        except psycopg2.errors.LockNotAvailable:
            raise self.lock_waited(doing or "do this") from None

    @translated
    def alone(self, query: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``query`` as its own transaction in one round trip (no ``BEGIN``, ``COMMIT``): its
        rows (the alert sweep's one statement, :func:`crontabber.alerts.sweep.sweep`)."""
        with self._own_transactions() as cur:
            cur.execute(query, params)
            return rows_of(cur)
