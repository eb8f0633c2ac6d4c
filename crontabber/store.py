"""The runner's state store: the queries of the job's row and its scheduled runs
(``crontabber``, ``crontabber_log``, the run ledger ``crontabber_run``, the intervals a
scheduled backfill run claims ``crontabber_interval``, the hosts ``crontabber_host``).
:class:`StateStore` is the one object its callers hold: the reads and the operator changes
are its own; a run's claim, lease and end are :class:`crontabber.runs.RunLifecycle`'s, the
connection and its errors' translation :class:`crontabber.connection.StoreConnection`'s
(also what the other stores run over: :meth:`StateStore.in_transaction`,
:meth:`StateStore.alone`): the rerun lane's queries are
:class:`crontabber.reruns.store.RerunStore`'s, the audit trail's
:class:`crontabber.audit_store.AuditStore`'s, the alert tables'
:class:`crontabber.alerts.store.AlertStore`'s.

Driver errors are translated and never escape: a row lock held by
another transaction (SQLSTATE 55P03) becomes :class:`JobLocked`, a lost or
refused connection becomes :class:`DatabaseUnavailable`. Each public method
is one visible transaction (``with self._conn:``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time

import psycopg2
import psycopg2.errors

from .config.database import DatabaseSettings
from .connection import (
    Q,
    _as_dict,
    connect,
    first_row,
    lost_cause,
    rows_of,
    server_behind,
    translated,
)
from .errors import DatabaseUnavailable, JobLocked
from .failures import first_line
from .runs import NextClaim, RunLifecycle, _log_abandoned, close_run, identity, unit_params
from .state import Claim, FleetHost, JobState, RunKind, Tick

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Sequence

    # Built only by the operator commands' queries, imported there: an idle
    # tick does not load crontabber.records (see crontabber.state).
    from .records import AuditEntry, HostState, LogEntry, Overview, RunRecord

#: What callers import from here (the connection's and the run ledger's helpers among them).
__all__ = [
    "NextClaim",
    "StateStore",
    "abandon_gone",
    "audit_json",
    "close_run",
    "connect",
    "first_row",
    "identity",
    "open_store",
    "rows_of",
    "server_behind",
    "unit_params",
]

logger = logging.getLogger(__name__)


class StateStore(RunLifecycle):
    """Reads and writes job state rows over one connection: the reads, the operator changes,
    the tick's record, a backfill run's interval claims; a run's claim, lease and end are
    :class:`RunLifecycle`'s, the connection :class:`crontabber.connection.StoreConnection`'s.
    """

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
