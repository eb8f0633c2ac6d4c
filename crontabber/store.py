"""The runner's state store: the queries of the job's row and its scheduled runs
(``crontabber``, ``crontabber_log``, the run ledger ``crontabber_run``, the intervals a
scheduled backfill run claims ``crontabber_interval``, the hosts ``crontabber_host``) and the
connection the other stores run over (:meth:`StateStore.in_transaction`,
:meth:`StateStore.alone`): the rerun lane's queries are
:class:`crontabber.reruns.store.RerunStore`'s, the audit trail's
:class:`crontabber.audit_store.AuditStore`'s, the alert tables'
:class:`crontabber.alerts.store.AlertStore`'s.

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
import time

import psycopg2
import psycopg2.errors

from . import sqlfiles
from .config.database import DatabaseSettings
from .errors import (
    DatabaseReadOnly,
    DatabaseUnavailable,
    HostDrained,
    JobLocked,
    JobLockError,
    JobOngoing,
    LeaseLost,
    LockWaitTimedOut,
    NotPermitted,
)
from .failures import first_line
from .frozen import Frozen
from .schema import round_trip_cursor
from .state import Claim, FinishRecord, FleetHost, JobState, RunEnd, RunKind, RunStatus, Tick, Unit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Concatenate, Mapping, ParamSpec, Sequence, TypeVar

    # Built only by the operator commands' queries, imported there: an idle
    # tick does not load crontabber.records (see crontabber.state).
    from .records import AuditEntry, HostState, LogEntry, Overview, RunRecord

    R = TypeVar("R")
    P = ParamSpec("P")

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


def lost_cause(exc: Exception) -> Exception:
    """The error that lost a connection: psycopg2 raises "connection already closed" when a
    ``with connection`` block ends on a connection its statement lost (the rollback meets it
    closed), over the server's (or PgBouncer's) own error, which is its ``__context__``."""
    context = exc.__context__
    if isinstance(exc, psycopg2.InterfaceError) and isinstance(context, psycopg2.Error):
        return context
    return exc


def translated(
    method: Callable[Concatenate[StateStore, P], R],
) -> Callable[Concatenate[StateStore, P], R]:
    """Decorate a store method: a lost connection, or one to a server that no longer takes
    writes (a primary demoted to a standby), is reopened and the call made once more (each
    method is one transaction, so a retry is safe; reopened with a multi-host address and
    ``target_session_attrs = read-write``, the connection finds the promoted primary); if
    that fails too, :class:`DatabaseUnavailable` (:class:`DatabaseReadOnly` for a standby).

    The retry is what lets a job that outlived a database restart or a failover still write
    its outcome and release its ``ongoing`` marker.
    """

    @functools.wraps(method)
    def wrapper(self: StateStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
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


class StateStore:
    """Reads and writes job state rows over one connection.

    Decide callbacks run inside the claiming transaction, while the job's
    row is locked, so the due and ongoing checks and the marking are atomic
    (crontabber did them in separate transactions).
    """

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
        (:func:`crontabber.schema.round_trip_cursor`): no ``BEGIN``, ``COMMIT``."""
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
    def states(self) -> dict[str, JobState]:
        """Every state row, keyed by app name (ghosts included)."""
        with self._conn, self._cursor() as cur:
            cur.execute(Q["all_states"])
            rows = (_as_dict(cur, row) for row in cur.fetchall())
            return {row["app_name"]: JobState.from_row(row) for row in rows}

    @translated
    def tick(self, tick: Tick) -> tuple[dict[str, JobState], dt.datetime, tuple[FleetHost, ...]]:
        """Record a run-mode tick in ``crontabber_host`` (host, version, pid, tags,
        last tick on the database clock, skew) and read every state row, the fleet as
        placement sees it (each host's tags, live, drained: this host's drain too) and
        the database clock: two statements, two round trips (the clock; the record
        and the rows, one transaction), as cheap as :meth:`states` and :meth:`now`
        were without the record.

        The skew is the host's clock minus the database's, taking the host's
        clock at the middle of the clock query (error: half its round trip).
        """
        with self._own_transactions() as cur:
            before = time.time()
            cur.execute(Q["clock"])
            now = cur.fetchone()[0]
            after = time.time()
            skew = (before + after) / 2 - now.timestamp()
            cur.execute(
                Q["tick_states"],
                {
                    "host": tick.host,
                    "version": tick.version,
                    "pid": tick.pid,
                    "now": now,
                    "skew": skew,
                    "behind": list(tick.schema_behind),
                    "tags": list(tick.tags),
                    "live_seconds": tick.live_seconds,
                    "lease_seconds": tick.lease_seconds,
                    "serve_seconds": tick.serve_seconds or None,
                },
            )
            rows = [_as_dict(cur, row) for row in cur.fetchall()]
            fleet = tuple(
                FleetHost(host, tuple(tags), live, drained)
                for host, tags, live, drained in (rows[0]["fleet"] if rows else ())
            )
            states = {row["app_name"]: JobState.from_row(row) for row in rows if row["app_name"]}
            return states, now, fleet

    @translated
    def fleet(self, live_seconds: float) -> tuple[FleetHost, ...]:
        """Every host that ticked, as placement sees it (``live``: within ``live_seconds``)."""
        with self._conn, self._cursor() as cur:
            cur.execute(Q["fleet"], {"live_seconds": live_seconds})
            return tuple(
                FleetHost(host, tuple(tags), live, drained)
                for host, tags, live, drained in cur.fetchall()
            )

    @translated
    def hosts(self) -> tuple[HostState, ...]:
        """Every host that ticked, with its drain (``crontabber_host``)."""
        from .records import HostState

        with self._conn, self._cursor() as cur:
            cur.execute(Q["hosts"])
            return tuple(HostState.from_row(_as_dict(cur, r)) for r in cur.fetchall())

    @translated
    def drain(self, host: str, until: dt.datetime | None, audit: AuditEntry) -> bool | None:
        """Drain ``host`` until ``until`` (None: until :meth:`undrain`), audited: whether it
        was drained already (its drain replaced: only when ``audit`` carries ``--replace``),
        or None (nothing written) when no host of that name ever ticked or a drain in force
        stays."""
        row = self._one("drain", {"host": host, "until": until, "audit": audit_json(audit)})
        assert row is not None
        return None if row["was_drained"] is None else bool(row["was_drained"])

    @translated
    def undrain(self, host: str, audit: AuditEntry) -> bool:
        """End ``host``'s drain now, audited; False (nothing audited) when it was not drained."""
        row = self._one("undrain", {"host": host, "audit": audit_json(audit)})
        return bool(row and row["undrained"])

    @translated
    def overview(self, app_names: Sequence[str] = ()) -> Overview:
        """What ``--nagios`` and ``--metrics-file`` read, in one transaction; the
        last run durations and the last successful run's metrics only for ``app_names``."""
        from .records import HostState, Overview

        with self._conn, self._cursor() as cur:
            cur.execute(Q["clock"])
            now = cur.fetchone()[0]
            cur.execute(Q["all_states"])
            states = {
                row["app_name"]: JobState.from_row(row)
                for row in (_as_dict(cur, r) for r in cur.fetchall())
            }
            cur.execute(Q["hosts"])
            hosts = tuple(HostState.from_row(_as_dict(cur, r)) for r in cur.fetchall())
            durations: dict[str, dt.timedelta] = {}
            metrics: dict[str, dict[str, float]] = {}
            if app_names:
                cur.execute(Q["last_durations"], {"app_names": list(app_names)})
                durations = {name: took for name, took in cur.fetchall() if took is not None}
                cur.execute(Q["last_metrics"], {"app_names": list(app_names)})
                metrics = {name: dict(values) for name, _, values in cur.fetchall()}
            failing = [name for name, state in states.items() if state.error_count]
            errors: dict[str, str] = {}
            if failing:  # a quiet fleet reads nothing more
                cur.execute(Q["last_errors"], {"app_names": failing})
                errors = dict(cur.fetchall())
        return Overview(now, states, hosts, durations, metrics, errors)

    @translated
    def state(self, app_name: str) -> JobState | None:
        row = self._one("get_state", {"app_name": app_name})
        return JobState.from_row(row) if row else None

    @translated
    def log_runs(self, app_name: str, runs: int) -> list[LogEntry]:
        """The log rows of the job's newest ``runs`` runs and of one run more
        (so callers can say whether older runs exist): newest run first,
        newest row first within a run. A row without run id is a run by itself."""
        return self._entries("log_runs", {"app_name": app_name, "runs": runs})

    @translated
    def run_log(self, app_name: str, run_id: int) -> list[LogEntry]:
        """Every log row of run ``run_id`` of the job, oldest first ([] if none)."""
        return self._entries("run_log", {"app_name": app_name, "run_id": run_id})

    @translated
    def last_failure(self, app_name: str) -> LogEntry | None:
        """The job's newest failed or fenced-off attempt in the log, or None."""
        from .records import LogEntry

        row = self._one("last_failure", {"app_name": app_name})
        return LogEntry.from_row(row) if row else None

    def _entries(self, name: str, params: Mapping[str, Any]) -> list[LogEntry]:
        from .records import LogEntry

        with self._conn, self._cursor() as cur:
            cur.execute(Q[name], params)
            return [LogEntry.from_row(_as_dict(cur, row)) for row in cur.fetchall()]

    @translated
    def claim(
        self,
        app_name: str,
        depends_on: tuple[str, ...],
        holder: tuple[str, int],
        decide: Callable[[JobState, dt.datetime], bool],
        kind: RunKind = RunKind.SCHEDULED,
        options: Sequence[str] = (),
        drainable: bool = False,
        *,
        lease_seconds: float,
    ) -> tuple[JobState, Claim] | None:
        """Lock the job's row, let ``decide`` check it, and mark it ongoing
        with a new run id (the run's fencing token) and a first heartbeat; the
        run's ledger row (``kind``, status running, the command line's ``options``) is
        written with the marker.

        ``decide(state, now)`` runs with the row locked; it returns False to
        leave the job alone (it is no longer due) or raises
        :class:`JobOngoing`. Returns the state as it was and the claim, or
        None when ``decide`` declined.

        ``drainable``: refuse when the host is drained (checked under the row lock).
        ``lease_seconds``: the claimer's lease, stored with the run (a takeover of it waits for
        that lease, whatever the taker's says: ``crontabber_claim``, migration 0031).

        The lock is ``FOR UPDATE NOWAIT`` (an operator's ``--job NAME [--force]``); a pass
        claims through :meth:`claim_next` instead.

        Raises:
            JobLocked: another transaction holds the row lock.
            JobOngoing: from ``decide``.
            HostDrained: ``drainable`` and an operator drained the host.
        """
        host, pid = holder
        params = {"app_name": app_name, "depends_on": list(depends_on), "host": host}
        try:
            with self._conn, self._cursor() as cur:
                cur.execute(Q["insert_skeleton"], params)
                cur.execute(Q["lock_state"], params)
                row = _as_dict(cur, cur.fetchone())
                state, now = JobState.from_row(row), row["now"]
                if drainable and row["drained"]:
                    raise HostDrained(host)
                if not decide(state, now):
                    return None
                return state, _mark_ongoing(
                    cur, state, depends_on, holder, now, kind, options, lease_seconds
                )
        except psycopg2.errors.LockNotAvailable:
            raise JobLocked(app_name) from None

    @translated
    def claim_next(
        self,
        names: Sequence[str],
        depends_on: Mapping[str, tuple[str, ...]],
        holder: tuple[str, int],
        decide: Callable[[JobState, dt.datetime], bool],
        new: Sequence[str] = (),
        options: Sequence[str] = (),
        *,
        lease_seconds: float,
    ) -> NextClaim:
        """A scheduled pass's claim of the first job of ``names`` (the pass's next candidates,
        in its order) whose row is still due and held by no other transaction, in one
        transaction whatever the number of runners: the rows other runners took since the
        pass read them (run since, or being claimed that moment: ``FOR UPDATE SKIP LOCKED``)
        are passed over by the same statement (``claim_next_due``), never tried one by one.

        A row without a marker is claimed by that statement: a short run's claim is one
        statement. A row with one is judged by ``decide(state, now)`` as in :meth:`claim`; a
        job it declines or that raises :class:`JobOngoing` (running elsewhere) is passed over
        and the next one locked, in the same transaction. ``new``: the candidates the pass
        found no row for (a first run): their rows are inserted first (``insert_skeleton``);
        ``depends_on``: each candidate's parents, written with the marker; ``lease_seconds``:
        the claimer's lease, stored with the run (as :meth:`claim`).

        Returns the claim (None: every candidate was passed over) and the candidates passed
        over before it, each with why (:class:`NextClaim`).

        Raises:
            HostDrained: an operator drained the host (checked under the first row lock).
        """
        host, pid = holder
        left = list(names)
        passed: list[tuple[str, JobLockError | None]] = []
        params = {
            "host": host,
            "pid": pid,
            "holder": f"{host}:{pid}",
            "depends": json.dumps({name: list(depends_on[name]) for name in names}),
            "options": list(options) or None,
            "lease_seconds": lease_seconds,
        }
        with self._conn, self._cursor() as cur:
            for app_name in new:
                skeleton = {"app_name": app_name, "depends_on": list(depends_on[app_name])}
                cur.execute(Q["insert_skeleton"], skeleton)
            while left:
                cur.execute(Q["claim_next_due"], {**params, "names": left})
                row = _as_dict(cur, cur.fetchone())
                chosen = row["app_name"]
                skipped = left[: left.index(chosen)] if chosen is not None else left
                held = set(row["still_due"])  # due still: another runner holds it that moment
                passed += [(name, JobLocked(name) if name in held else None) for name in skipped]
                if chosen is None:
                    break
                left = left[len(skipped) + 1 :]
                state, now = JobState.from_row(row), row["now"]
                if row["drained"]:
                    raise HostDrained(host)
                if row["claimed_run_id"] is not None:  # no marker: claimed by the statement
                    claim = Claim(state.app_name, row["claimed_run_id"], host, pid, now)
                    return NextClaim((state, claim), tuple(passed))
                try:  # a marker: the runner's rule judges it (live elsewhere, or gone)
                    if not decide(state, now):
                        passed.append((state.app_name, None))
                        continue
                except JobOngoing as exc:
                    passed.append((state.app_name, exc))
                    continue
                claim = _mark_ongoing(
                    cur,
                    state,
                    depends_on[state.app_name],
                    holder,
                    now,
                    RunKind.SCHEDULED,
                    options,
                    lease_seconds,
                )
                return NextClaim((state, claim), tuple(passed))
        return NextClaim(None, tuple(passed))

    @translated
    def heartbeat(self, claim: Claim, output: tuple[str, int] | None = None) -> dt.datetime | None:
        """Renew the run's lease, and save the run's captured ``(output, bytes dropped)``
        when given; the new heartbeat, or None when the run no longer holds the job (it
        was taken over or released: fenced off)."""
        text, dropped = output if output is not None else (None, None)
        row = self._one(
            "heartbeat",
            {
                "app_name": claim.app_name,
                "run_id": claim.run_id,
                "output": text,
                "dropped": dropped,
            },
        )
        return row["heartbeat"] if row else None

    @translated
    def record_success(
        self,
        claim: Claim,
        success: dt.datetime,
        duration: dt.timedelta,
        summary: str | None = None,
        metrics: Mapping[str, float] | None = None,
    ) -> bool:
        """Save one successful unit: ``last_success``, a log row with the job's
        ``summary`` of it, and the run's progress in the ledger (with the unit's
        ``metrics``), together.

        Returns False, writing nothing, when the run no longer holds the job.
        """
        with self._conn, self._cursor() as cur:
            return _record_units(cur, claim, [(success, duration, summary, metrics)])

    @translated
    def finish(
        self,
        claim: Claim,
        outcome: FinishRecord,
        depends_on: tuple[str, ...],
        failure: tuple[dt.timedelta, Mapping[str, str], str] | None = None,
        units: Sequence[Unit] = (),
        end: RunEnd | None = None,
        ordinary: bool = False,
    ) -> tuple[bool, JobState | None, dt.datetime | None]:
        """Write the end of an attempt, release the marker and log a failure
        (``(duration, last_error record, exception repr)``), in one transaction,
        with the successful ``units`` not written yet (an ordinary job's one
        unit: its success and its next run are then one commit), and the run's
        ledger row (``end``; fenced off when the run no longer held the job).
        ``ordinary``: the run of a job that is not a backfill job (it holds no interval):
        when it succeeded, all of it is one statement (``finish_ordinary``).

        Returns whether the run still held the job, with the job's state row as the end
        left it and the database's clock then (what the runner's pass goes on with: no
        re-read of every job); held False when the run no longer holds the job (another run
        took it over, or an operator released it): the state is left alone and the log
        row says the run was fenced off. The row and clock are None when not known (fenced
        off, or a retry whose first commit went through).
        """
        with self._conn, self._cursor() as cur:
            if ordinary and failure is None and len(units) <= 1:
                fast = _finish_ordinary(cur, claim, outcome, depends_on, units, end)
                if fast is not None:
                    return True, JobState.from_row(fast), fast["now"]
            _record_units(cur, claim, units)  # before finish, which clears the marker they check
            cur.execute(
                Q["finish"],
                {
                    "app_name": claim.app_name,
                    "run_id": claim.run_id,
                    "started": outcome.started,
                    "next_run": outcome.next_run,
                    "succeeded": outcome.succeeded,
                    "keeps_health": outcome.keeps_health,
                    "last_error": json.dumps(dict(outcome.error)),
                    "depends_on": list(depends_on),
                },
            )
            ended = first_row(cur)
            held = ended is not None
            if not held and _finished_already(cur, claim, outcome):
                return True, None, None  # a retry after a commit whose reply was lost
            end = end or RunEnd(RunStatus.SUCCEEDED if failure is None else RunStatus.FAILED)
            recorded = close_run(cur, claim, end, held, failure)
            if ended is None:
                return recorded, None, None
            return recorded, JobState.from_row(ended), ended["now"]

    @translated
    def recent_runs(self, app_name: str, limit: int) -> list[RunRecord]:
        """The job's newest ``limit`` runs in the ledger, newest first, without output (what
        a run's checks judge it against: :mod:`crontabber.alerts.checks`)."""
        from .records import RunRecord

        with self._conn, self._cursor() as cur:
            cur.execute(
                Q["run_records"],
                {"app_name": app_name, "run_ids": None, "limit": limit, "with_output": False},
            )
            return [RunRecord.from_row(_as_dict(cur, row)) for row in cur.fetchall()]

    @translated
    def last_errors(self, app_names: Sequence[str]) -> dict[str, str]:
        """The newest failure of each job of ``app_names`` in one plain line (the run
        ledger's: ``Elasticsearch at http://...: connection refused``), for the jobs that have
        one; crontabber's ``last_error`` keeps the raw type and message."""
        if not app_names:
            return {}
        with self._conn, self._cursor() as cur:
            cur.execute(Q["last_errors"], {"app_names": list(app_names)})
            return dict(cur.fetchall())

    @translated
    def mark_breach(self, app_name: str, run_id: int, rules: Sequence[str]) -> None:
        """Record that run ``run_id`` of the job breached ``rules`` (its checks): it is left
        out of the baseline later runs are judged against."""
        with self._conn, self._cursor() as cur:
            cur.execute(
                Q["mark_breach"],
                {"app_name": app_name, "run_id": run_id, "breach": "; ".join(rules)},
            )

    @translated
    def run_records(self, app_name: str, run_ids: Sequence[int]) -> dict[int, RunRecord]:
        """The ledger rows of the job's runs ``run_ids`` (those it has), without output."""
        from .records import RunRecord

        if not run_ids:
            return {}
        with self._conn, self._cursor() as cur:
            cur.execute(
                Q["run_records"],
                {
                    "app_name": app_name,
                    "run_ids": list(run_ids),
                    "limit": None,
                    "with_output": False,
                },
            )
            records = (RunRecord.from_row(_as_dict(cur, row)) for row in cur.fetchall())
            return {record.run_id: record for record in records}

    @translated
    def run_output(self, app_name: str, run_id: int | None = None) -> RunRecord | None:
        """Run ``run_id`` of the job (its newest run when None) from the ledger, with
        its captured output; None when the ledger has no such run."""
        from .records import RunRecord

        row = self._one(
            "run_records",
            {
                "app_name": app_name,
                "limit": 1,
                "with_output": True,
                "run_ids": None if run_id is None else [run_id],
            },
        )
        return RunRecord.from_row(row) if row else None

    @translated
    def claim_interval(
        self,
        claim: Claim,
        kind: RunKind,
        starts: dt.datetime,
        lease_seconds: float,
        gone_here: Callable[[str], bool] | None = None,
    ) -> str | None:
        """Take interval ``starts`` of the job for the run (under the interval row's lock);
        None when taken, else who holds it now (``run 12 (rerun) on cron-2:811``). A rerun of
        this host holding it whose process is gone (``gone_here(holder)``) is recorded
        abandoned and the interval taken at once.

        A scheduled backfill run's claim, made with the job's marker held (the runner's
        supervisor calls it before each interval); a rerun's run claims through its group
        instead (:meth:`crontabber.reruns.store.RerunStore.next_interval`)."""
        params = {
            **identity(claim),
            "starts": starts,
            "kind": kind.value,
            "holder": f"{claim.host}:{claim.pid}",
            "lease_seconds": lease_seconds,
        }
        with self._conn, self._cursor() as cur:
            for _ in range(2):
                cur.execute(Q["claim_interval"], params)
                if cur.fetchone() is not None:
                    return None
                cur.execute(Q["interval_holder"], params)
                row = cur.fetchone()
                if row is None:
                    return "another run"
                if row[1] != RunKind.RERUN.value or gone_here is None or not gone_here(row[2]):
                    break
                abandon_gone(cur, row[0], row[2], claim)
            return f"run {row[0]} ({row[1]}) on {row[2]}"

    @translated
    def locked_change(
        self,
        app_name: str,
        change: str,
        decide: Callable[[JobState, dt.datetime], bool],
        audit: AuditEntry | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> JobState | None:
        """Lock the job's row and apply ``change`` (``"release"``, ``"reset"`` or
        ``"mark_success"``, with ``params``) if ``decide(state, now)`` allows it,
        recording ``audit`` in the same transaction (the operator function does:
        migration 0025; None: audited as the database user); the state as it was, or
        None when there is no row. ``decide`` may raise to refuse (nothing is
        written).

        Raises:
            JobLocked: another transaction holds the row lock (NOWAIT).
            NotPermitted: the database user may not make the change (an operator's).
        """
        query = {
            "release": Q["release"],
            "reset": Q["delete_state"],
            "mark_success": Q["mark_success"],
        }[change]
        row_locked = False
        try:
            with self._conn, self._cursor() as cur:
                cur.execute(Q["lock_state"], {"app_name": app_name, "host": None})
                row_locked = True  # (a lock timeout after this is the change's: 0028)
                row = cur.fetchone()
                if row is None:
                    return None
                found = _as_dict(cur, row)
                state = JobState.from_row(found)
                if decide(state, found["now"]):
                    if change in ("release", "reset") and state.ongoing is not None:
                        by = audit.actor if audit is not None else "an operator"
                        _log_abandoned(
                            cur, state, f"{'released' if change == 'release' else 'reset'} by {by}"
                        )
                    cur.execute(
                        query,
                        {
                            "app_name": app_name,
                            "now": found["now"],
                            "audit": audit_json(audit),
                            **(params or {}),
                        },
                    )
                return state
        except psycopg2.errors.LockNotAvailable:
            if row_locked:
                raise self.lock_waited(change) from None
            raise JobLocked(app_name) from None
        except psycopg2.errors.InsufficientPrivilege as exc:
            raise self.not_permitted(change, exc) from None

    @translated
    def pause(
        self,
        app_name: str,
        depends_on: tuple[str, ...],
        until: dt.datetime | None,
        audit: AuditEntry,
        replace: bool = False,
    ) -> bool:
        """Pause the job until ``until`` (None: until someone resumes it, stored as
        ``infinity``); True if paused. A pause still in force stays (False, nothing audited)
        unless ``replace``."""
        params = {
            "app_name": app_name,
            "depends_on": list(depends_on),
            "until": until,
            "replace": replace,
        }
        row = self._one("pause", {**params, "audit": audit_json(audit)})
        return bool(row and row["paused"])

    @translated
    def breach_pause(
        self,
        app_name: str,
        depends_on: tuple[str, ...],
        until: dt.datetime | None,
        run_id: int,
        audit: AuditEntry,
    ) -> bool:
        """:meth:`pause` by a tick, after run ``run_id`` of the job breached a check (``on_breach =
        pause``): the one pause the runner's database role may make. A pause in force stays.

        The database judges the stored run (migration 0030): the job's latest finished
        scheduled run, succeeded, its breach recorded (:meth:`mark_breach`), the run the state
        row last recorded; the pause lasts until resumed and its audit row's actor
        (``crontabber``), reason and detail are the function's. ``until`` and ``audit`` are
        sent for the release before 0030 and ignored.

        Raises:
            NotPermitted: the run is not such a run (nothing paused).
        """
        params = {
            "app_name": app_name,
            "depends_on": list(depends_on),
            "until": until,
            "run_id": run_id,
        }
        row = self._one("breach_pause", {**params, "audit": audit_json(audit)})
        return bool(row and row["paused"])

    @translated
    def resume(self, app_name: str, audit: AuditEntry) -> None:
        """End the job's pause, if any, now: ``paused_until`` becomes the database's clock
        (lateness counts from it: :func:`crontabber.scheduling.lateness`). An ``audit`` of
        scope ``all`` (``--resume all``) ends only a pause ``--pause all`` made (nothing is
        audited otherwise): another operator's pause or a breach pause stays."""
        with self._conn, self._cursor() as cur:
            cur.execute(Q["resume"], {"app_name": app_name, "audit": audit_json(audit)})

    @translated
    def pause_scopes(self) -> dict[str, str | None]:
        """The jobs paused now, each with its pause's scope: ``"all"`` for a pause made by
        ``--pause all`` (the only pauses ``--resume all`` ends), None for a job's own pause
        or a breach pause."""
        with self._conn, self._cursor() as cur:
            cur.execute(Q["pause_scopes"])
            return {name: scope for name, scope in cur.fetchall()}

    # ------------------------------------------------ for the other stores' queries

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


def _record_units(cur: Any, claim: Claim, units: Sequence[Unit]) -> bool:
    """Record each successful unit (its time, its duration, the job's summary of it and its
    metrics) of a run still holding the job; False (nothing written) once it no longer holds it."""
    for when, took, summary, metrics in units:
        cur.execute(
            Q["record_success"],
            {"app_name": claim.app_name, "success": when, "run_id": claim.run_id},
        )
        if cur.fetchone() is None:
            return False
        cur.execute(Q["log_success"], unit_params(claim, when, took, summary, metrics))
        cur.execute(Q["interval_done"], {**identity(claim), "starts": when})
    return True


def _finish_ordinary(
    cur: Any,
    claim: Claim,
    outcome: FinishRecord,
    depends_on: tuple[str, ...],
    units: Sequence[Unit],
    end: RunEnd | None,
) -> dict[str, Any] | None:
    """An ordinary run's success and its unit (at most one) written in one statement; the
    state row as it left it, or None (nothing written) when the run no longer holds the job."""
    when, took, summary, metrics = units[0] if units else (None, dt.timedelta(0), None, None)
    end = end or RunEnd(RunStatus.SUCCEEDED)
    cur.execute(
        Q["finish_ordinary"],
        {
            **identity(claim),
            "success": when,
            "duration": took,
            "summary": summary,
            "metrics": json.dumps(dict(metrics)) if metrics else None,
            "started": outcome.started,
            "next_run": outcome.next_run,
            "keeps_health": outcome.keeps_health,
            "last_error": json.dumps(dict(outcome.error)),
            "depends_on": list(depends_on),
            "status": end.status.value,
            "error": end.error,
            "output": end.output,
            "dropped": end.dropped,
        },
    )
    return first_row(cur)


def unit_params(
    claim: Claim,
    when: dt.datetime,
    took: dt.timedelta,
    summary: str | None,
    metrics: Mapping[str, float] | None,
) -> dict[str, Any]:
    """``log_success``'s parameters: the unit, its summary and its metrics (JSON, or None)."""
    return {
        **identity(claim),
        "success": when,
        "duration": took,
        "summary": summary,
        "metrics": json.dumps(dict(metrics)) if metrics else None,
    }


def _end_run(cur: Any, claim: Claim, end: RunEnd, held: bool) -> None:
    """Write the run's end to its ledger row, and to the interval it still held; a run that
    no longer held the job is fenced off."""
    status = end.status if held else RunStatus.FENCED_OFF
    cur.execute(
        Q["end_run"],
        {
            "run_id": claim.run_id,
            "status": status.value,
            "error": end.error,
            "output": end.output,
            "dropped": end.dropped,
        },
    )
    cur.execute(
        Q["end_intervals"], {"run_id": claim.run_id, "status": status.value, "error": end.error}
    )


def close_run(
    cur: Any,
    claim: Claim,
    end: RunEnd,
    held: bool,
    failure: tuple[dt.timedelta, Mapping[str, str], str] | None,
) -> bool:
    """A run's ledger end and, for a failure or a fenced-off run, its log row; True when the
    run still held what it ended (a success recorded as such). A scheduled run's
    (:meth:`StateStore.finish`) and a rerun's
    (:meth:`crontabber.reruns.store.RerunStore.finish_lane`)."""
    _end_run(cur, claim, end, held)
    if held and failure is None:
        return True
    _log_failure(cur, claim, failure, fenced=not held)
    return held


def _finished_already(cur: Any, claim: Claim, outcome: FinishRecord) -> bool:
    """Whether the state row shows this run's own finish (its run id, no marker,
    its start as last run): a retried finish whose first commit went through."""
    cur.execute(Q["get_state"], {"app_name": claim.app_name})
    row = cur.fetchone()
    now = _as_dict(cur, row) if row else {}
    return (
        now.get("run_id") == claim.run_id
        and now.get("ongoing") is None
        and now.get("last_run") == outcome.started
    )


def _log_failure(
    cur: Any,
    claim: Claim,
    failure: tuple[dt.timedelta, Mapping[str, str], str] | None,
    *,
    fenced: bool,
) -> None:
    """Log a failed attempt; a run fenced off logs ``LeaseLost``, saying how
    the job itself ended (failed with its error, or succeeded)."""
    duration, error, exc_repr = failure or (dt.timedelta(0), {}, "")
    if fenced:
        ended = f"the job {'failed: ' + exc_repr if failure else 'succeeded'}"
        error = {"type": repr(LeaseLost), "traceback": str(error.get("traceback", ""))}
        exc_repr = f"LeaseLost('run {claim.run_id} was fenced off; {ended}')"
    cur.execute(
        Q["log_failure"],
        {
            **identity(claim),
            "duration": duration,
            "exc_type": error["type"],
            "exc_value": exc_repr,
            "exc_traceback": error["traceback"],
        },
    )


class NextClaim(Frozen):
    """What :meth:`StateStore.claim_next` took: the job's state before and its claim (None:
    nothing), and the candidates it passed over, each with why: :class:`JobOngoing` (running
    elsewhere), :class:`JobLocked` (another runner held its row that moment), None (another
    runner ran it since the pass read it)."""

    claimed: tuple[JobState, Claim] | None
    passed: tuple[tuple[str, JobLockError | None], ...]


def _mark_ongoing(
    cur: Any,
    state: JobState,
    depends_on: tuple[str, ...],
    holder: tuple[str, int],
    now: dt.datetime,
    kind: RunKind,
    options: Sequence[str],
    lease_seconds: float,
) -> Claim:
    """Mark the locked job ongoing for ``holder`` with a new run id (its fencing token) and
    write the run's ledger row (``crontabber_claim``); a marker ``decide`` let it take over is
    recorded abandoned by the same call (the function refuses a live one: its lease is the
    holder's, stored at its claim)."""
    host, pid = holder
    abandoned: dict[str, str | None] = (
        dict(_abandoned_record(state, f"taken over by {host}:{pid}"))
        if state.ongoing is not None
        else {"exc_type": None, "exc_value": None}
    )
    cur.execute(
        Q["mark_ongoing"],
        {
            "app_name": state.app_name,
            "depends_on": list(depends_on),
            "now": now,
            "holder": f"{host}:{pid}",
            "host": host,
            "pid": pid,
            "kind": kind.value,
            "options": list(options) or None,
            "lease_seconds": lease_seconds,
            **abandoned,
        },
    )
    return Claim(state.app_name, cur.fetchone()[0], host, pid, now)


def _abandoned_record(state: JobState, found_by: str) -> dict[str, str]:
    """The failure record (``exc_type``, ``exc_value``) of ``state``'s run, abandoned (its
    holder died), saying who found it."""
    from .errors import RunAbandoned
    from .formats import utc_text

    beat = f"last heartbeat {utc_text(state.heartbeat)}" if state.heartbeat else "no heartbeat"
    holder = state.ongoing_by or "an unknown holder (crontabber 0.18?)"
    value = (
        f"RunAbandoned('run {state.run_id} on {holder}, started {utc_text(state.ongoing)}, "
        f"stopped renewing its lease without recording its end ({beat}); {found_by}')"
    )
    return {"exc_type": repr(RunAbandoned), "exc_value": value}


def _log_abandoned(cur: Any, state: JobState, found_by: str) -> None:
    """Record ``state``'s run as abandoned (its holder died), saying who found it."""
    cur.execute(
        Q["log_abandoned"], {"app_name": state.app_name, **_abandoned_record(state, found_by)}
    )


def abandon_gone(cur: Any, run_id: int, holder: str, by: Claim) -> None:
    """Record rerun ``run_id``, whose process on this host is gone, as abandoned, in the
    transaction of ``cur``: what it held is free at once (``claim_interval``'s rule, and a
    rerun's :meth:`crontabber.reruns.store.RerunStore.next_interval`'s)."""
    logger.warning(
        "%s: run %s (rerun) on %s is gone; taking its interval over",
        by.app_name,
        run_id,
        holder,
        extra={"job": by.app_name},
    )
    cur.execute(
        Q["abandon_run"],
        {
            "run_id": run_id,
            "error": f"its process {holder} is gone; taken over by run {by.run_id} on {by.host}",
        },
    )


def audit_json(entry: AuditEntry | None) -> str | None:
    """``entry`` as the operator functions of migration 0025 take it (they record the
    action and its subject themselves); None: they name the database user."""
    if entry is None:
        return None
    return json.dumps(
        {"actor": entry.actor, "reason": entry.reason, "detail": dict(entry.detail)},
        default=str,
    )


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


def identity(claim: Claim) -> dict[str, Any]:
    """The columns naming who wrote a log row."""
    return {
        "app_name": claim.app_name,
        "run_id": claim.run_id,
        "host": claim.host,
        "pid": claim.pid,
    }


def open_store(db: DatabaseSettings, schema_dirs: Sequence[str] = ()) -> StateStore:
    """Connect to the state database and bring its schema up to date: the runner's, and
    ``schema_dirs`` (the configured jobs' own, :func:`crontabber.config.catalog.schema_dirs`). A
    database newer than this code is not refused here (reading it is fine): the store says
    so (:attr:`StateStore.unknown_migrations`), and whatever claims jobs refuses.

    Raises:
        DatabaseUnavailable: the server cannot be reached, refuses the login,
            or the schema cannot be applied (:class:`SchemaNeedsOwner`: not by this login).
    """
    from .schema import ensure_schema, with_runner

    conn = connect(db)
    try:
        applied = ensure_schema(conn, with_runner(schema_dirs))
    except psycopg2.Error as exc:
        # the connection lost (PgBouncer's "server login has been failing", a server gone):
        # the server's words, not a schema failure (every tick reads the schema's state)
        lost = bool(conn.closed)
        conn.close()
        said = first_line(lost_cause(exc))
        reason = said if lost else f"applying the schema failed: {said}"
        raise DatabaseUnavailable(db.target, reason) from None
    except BaseException:  # SchemaNeedsOwner: a login that may not apply it
        conn.close()
        raise
    return StateStore(conn, db, applied.unknown)
