"""The runner's state store: every query on tables ``crontabber`` and
``crontabber_log`` runs here.

Driver errors are translated here and never escape: a row lock held by
another transaction (SQLSTATE 55P03) becomes :class:`JobLocked`, a lost or
refused connection becomes :class:`DatabaseUnavailable`. Each public method
is one visible transaction (``with self._conn:``).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeVar

import psycopg2
import psycopg2.errors

from . import queries
from .errors import DatabaseUnavailable, JobLocked
from .state import JobState, Outcome

logger = logging.getLogger(__name__)

Q = queries.load("crontabber.sql")

R = TypeVar("R")


@dataclass(frozen=True)
class DatabaseSettings:
    """Where a PostgreSQL database is; the password is never printed."""

    host: str = "localhost"
    port: int = 5432
    dbname: str = "crontabber"
    user: str = ""
    password: str = ""

    def __repr__(self) -> str:
        return f"DatabaseSettings({self.target})"

    @property
    def target(self) -> str:
        """``user@host:port/dbname``: safe to print and log."""
        return f"{self.user}@{self.host}:{self.port}/{self.dbname}"


def connect(db: DatabaseSettings, application_name: str = "crontabber") -> Any:
    """Open a psycopg2 connection whose session time zone is UTC.

    Raises:
        DatabaseUnavailable: when the server cannot be reached or refuses the login.
    """
    try:
        return psycopg2.connect(
            host=db.host,
            port=db.port,
            dbname=db.dbname,
            user=db.user or None,
            password=db.password or None,
            application_name=application_name,
            connect_timeout=10,
            options="-c timezone=UTC",
        )
    except psycopg2.OperationalError as exc:
        raise DatabaseUnavailable(db.target, _first_line(exc)) from None


def _as_dict(cursor: Any, row: tuple) -> dict[str, Any]:
    """A row as ``{column: value}`` (psycopg2.extras costs a tick ~2 ms to import)."""
    return {column.name: value for column, value in zip(cursor.description, row)}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def translated(method: Callable[..., R]) -> Callable[..., R]:
    """Decorate a store method: a lost connection is reopened and the call made
    once more (each method is one transaction, so a retry is safe); if that
    fails too, :class:`DatabaseUnavailable`.

    The retry is what lets a job that outlived a database restart still write
    its outcome and release its ``ongoing`` marker.
    """

    @functools.wraps(method)
    def wrapper(self: "StateStore", *args: Any, **kwargs: Any) -> R:
        for attempt in (1, 2):
            try:
                return method(self, *args, **kwargs)
            except (psycopg2.OperationalError, psycopg2.InterfaceError) as exc:
                if isinstance(exc, psycopg2.errors.LockNotAvailable):
                    raise
                if attempt == 2 or not self.reconnect():
                    raise DatabaseUnavailable("the state database", _first_line(exc)) from None
                logger.warning("lost the state database connection (%s); reconnected",
                               _first_line(exc))
        raise AssertionError("unreachable")

    return wrapper


class StateStore:
    """Reads and writes job state rows over one connection.

    Decide callbacks run inside the claiming transaction, while the job's
    row is locked, so the due and ongoing checks and the marking are atomic
    (crontabber did them in separate transactions).
    """

    def __init__(self, connection: Any, db: DatabaseSettings | None = None) -> None:
        self._conn = connection
        self._db = db

    def close(self) -> None:
        self._conn.close()

    def reconnect(self) -> bool:
        """Replace a broken connection; False if there is no way to or it fails."""
        if self._db is None:
            return False
        try:
            self._conn.close()
            self._conn = connect(self._db)
        except (DatabaseUnavailable, psycopg2.Error):
            return False
        return True

    def _cursor(self) -> Any:
        return self._conn.cursor()

    def _one(self, name: str, params: Mapping[str, Any] | None = None) -> dict | None:
        with self._conn, self._cursor() as cur:
            cur.execute(Q[name], params)
            row = cur.fetchone()
            return _as_dict(cur, row) if row is not None else None

    @translated
    def now(self) -> dt.datetime:
        """The database's clock (``clock_timestamp()``), in UTC."""
        row = self._one("clock")
        assert row is not None
        return row["now"]

    @translated
    def states(self) -> dict[str, JobState]:
        """Every state row, keyed by app name (ghosts included)."""
        with self._conn, self._cursor() as cur:
            cur.execute(Q["all_states"])
            rows = (_as_dict(cur, row) for row in cur.fetchall())
            return {row["app_name"]: JobState.from_row(row) for row in rows}

    @translated
    def state(self, app_name: str) -> JobState | None:
        row = self._one("get_state", {"app_name": app_name})
        return JobState.from_row(row) if row else None

    @translated
    def claim(
        self,
        app_name: str,
        depends_on: tuple[str, ...],
        holder: str,
        decide: Callable[[JobState, dt.datetime], bool],
    ) -> tuple[JobState, dt.datetime] | None:
        """Lock the job's row, let ``decide`` check it, and mark it ongoing.

        ``decide(state, now)`` runs with the row locked; it returns False to
        leave the job alone (it is no longer due) or raises
        :class:`JobOngoing`. Returns the state as it was and the database time
        of the claim, or None when ``decide`` declined.

        Raises:
            JobLocked: another transaction holds the row lock (NOWAIT).
            JobOngoing: from ``decide``.
        """
        params = {"app_name": app_name, "depends_on": list(depends_on)}
        try:
            with self._conn, self._cursor() as cur:
                cur.execute(Q["insert_skeleton"], params)
                cur.execute(Q["lock_state"], params)
                row = _as_dict(cur, cur.fetchone())
                state, now = JobState.from_row(row), row["now"]
                if not decide(state, now):
                    return None
                cur.execute(Q["mark_ongoing"], {**params, "now": now, "holder": holder})
                return state, now
        except psycopg2.errors.LockNotAvailable:
            raise JobLocked(app_name) from None

    @translated
    def record_success(self, app_name: str, success: dt.datetime, duration: dt.timedelta) -> None:
        """Save one successful unit: ``last_success`` and a log row, together."""
        with self._conn, self._cursor() as cur:
            cur.execute(Q["record_success"], {"app_name": app_name, "success": success})
            cur.execute(
                Q["log_success"],
                {"app_name": app_name, "success": success, "duration": duration},
            )

    @translated
    def log_failure(
        self, app_name: str, duration: dt.timedelta, error: Mapping[str, str], exc_repr: str
    ) -> None:
        """Write the log row of a failed attempt (``exc_value`` is the repr, as crontabber)."""
        with self._conn, self._cursor() as cur:
            cur.execute(
                Q["log_failure"],
                {
                    "app_name": app_name,
                    "duration": duration,
                    "exc_type": error["type"],
                    "exc_value": exc_repr,
                    "exc_traceback": error["traceback"],
                },
            )

    @translated
    def finish(
        self, app_name: str, outcome: Outcome, depends_on: tuple[str, ...], holder: str
    ) -> None:
        """Write the end of an attempt and release the ongoing marker if still ours."""
        with self._conn, self._cursor() as cur:
            cur.execute(
                Q["finish"],
                {
                    "app_name": app_name,
                    "started": outcome.started,
                    "next_run": outcome.next_run,
                    "succeeded": outcome.succeeded,
                    "last_error": json.dumps(dict(outcome.error)),
                    "depends_on": list(depends_on),
                    "holder": holder,
                },
            )

    @translated
    def reset(self, app_name: str) -> bool:
        """Delete the job's state row; True if there was one. The log is kept."""
        return self._one("delete_state", {"app_name": app_name}) is not None

    def rollback_quietly(self) -> None:
        """Abandon any open transaction after an interrupt; never raises."""
        try:
            self._conn.rollback()
        except psycopg2.Error:
            pass



def open_store(db: DatabaseSettings) -> StateStore:
    """Connect to the state database and bring its schema up to date.

    Raises:
        DatabaseUnavailable: the server cannot be reached, refuses the login,
            or the schema cannot be applied.
    """
    from .schema import ensure_schema

    conn = connect(db)
    try:
        ensure_schema(conn)
    except psycopg2.Error as exc:
        conn.close()
        raise DatabaseUnavailable(db.target, f"applying the schema failed: {_first_line(exc)}") from None
    return StateStore(conn, db)
