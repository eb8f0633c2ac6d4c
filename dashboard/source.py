"""Where the dashboard's data comes from: the runner's settings and jobs, read
once, and per request one read-only database session.

Every document has the shape of the command line's ``--json`` where the
command line has one, built by the same functions:

- ``jobs``: ``--list-jobs --json`` (:func:`crontabber.inspection.job_views_now`);
- ``history``: ``--history NAME --json`` (:func:`crontabber.inspection.job_runs`);
- a job's metric charts: its last runs in the run ledger (``StateStore.recent_runs``, what
  the run checks judge against), each with the metrics it returned;
- ``fleet``: ``--nagios --json`` (:func:`crontabber.nagios.nagios_check`) plus
  every host of ``crontabber_host`` (what ``--metrics-file`` exports);
- ``pipeline``: the panels (no command shows them): see :mod:`dashboard.pipeline`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import threading
from typing import Any, Iterator, Mapping

from crontabber import inspection, nagios
from crontabber.alerts.rules import missed_deadlines
from crontabber.config.catalog import BrokenEntry, Job, load_catalog
from crontabber.config.settings import Settings, load_settings
from crontabber.placement import drain_line
from crontabber.runner import lease_rules, markers_from_here
from crontabber.store import StateStore, connect

from .store import PipelineStore

HISTORY_LIMIT = 20  # runs in a job's history page, as --history's default
SPARK_RUNS = 20  # runs in a job's duration chart
METRIC_RUNS = 50  # runs in a job's metric charts


@dataclasses.dataclass
class Session:
    """One request's view of the database: the runner's store and the
    pipeline store over one read-only connection."""

    connection: Any
    state: StateStore
    pipeline: PipelineStore


class Source:
    """The runner's settings and configured jobs (loaded once, checked like a
    tick's: a bad configuration raises ``ConfigurationError``; a jobs entry whose class does
    not load is in ``broken``, shown as a row), and the clients of Elasticsearch and S3,
    built on first use and shared by threads (both clients are thread-safe)."""

    def __init__(
        self, settings: Settings, jobs: list[Job], broken: list[BrokenEntry] | None = None
    ) -> None:
        self.settings = settings
        self.jobs = jobs
        self.broken = broken or []
        self._lock = threading.Lock()
        self._clients: dict[str, Any] = {}
        self._cache_lock = threading.Lock()
        self._cache: dict[str, tuple[float, Any]] = {}

    @classmethod
    def load(
        cls,
        conf_path: str | None,
        overrides: Mapping[str, str],
        environ: Mapping[str, str] | None = None,
    ) -> "Source":
        """Read ``crontabber.ini`` (``conf_path``, else the runner's default
        places), the environment and ``overrides`` as the runner does.

        Raises:
            ConfigurationError: a missing file, a bad value, an unknown name.
        """
        settings = load_settings(conf_path, overrides, environ)
        catalog = load_catalog(settings)
        return cls(settings, catalog.jobs, catalog.broken)

    def client(self, kind: str, build: Any) -> Any:
        """The shared client ``kind``, built by ``build()`` the first time."""
        with self._lock:
            if kind not in self._clients:
                self._clients[kind] = build()
            return self._clients[kind]

    def cached(self, kind: str, seconds: float, build: Any) -> Any:
        """``build()``'s value, computed again only when the last one is older than
        ``seconds`` (a value per ``kind``; concurrent requests wait for one computation)."""
        import time

        with self._cache_lock:
            found = self._cache.get(kind)
            if found is not None and time.monotonic() - found[0] < seconds:
                return found[1]
            value = build()
            self._cache[kind] = (time.monotonic(), value)
            return value

    def job(self, app_name: str) -> Job | None:
        return next((job for job in self.jobs if job.app_name == app_name), None)

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """A read-only connection for one request (closed afterwards): the
        dashboard cannot change anything even by mistake.

        Raises:
            DatabaseUnavailable: the database cannot be reached.
        """
        db = self.settings.database
        conn = connect(db, application_name="dashboard")
        try:
            conn.set_session(readonly=True)
            yield Session(conn, StateStore(conn, db), PipelineStore(conn, db.target))
        finally:
            conn.close()

    # ------------------------------------------------------------------ documents

    def jobs_views(self, session: Session) -> tuple[list[Any], dt.datetime]:
        """Every configured job's view and the database clock (``--list-jobs``)."""
        return inspection.job_views_now(self.settings, self.jobs, session.state, (), self.broken)

    def job_view(self, session: Session, app_name: str) -> tuple[Any, dt.datetime]:
        """The view of the configured job ``app_name`` (None for a ghost) and the database
        clock (``--list-jobs NAME``)."""
        if self.job(app_name) is None:
            return None, session.state.now()
        found, now = inspection.job_views_now(self.settings, self.jobs, session.state, [app_name])
        return found[0], now

    def jobs_document(self, session: Session) -> dict[str, Any]:
        """``--list-jobs --json``."""
        from crontabber.views import jobs_document

        found, now = self.jobs_views(session)
        return jobs_document(found, now)

    def runs(self, session: Session, name: str, limit: int = HISTORY_LIMIT) -> inspection.JobRuns:
        """A job's newest runs (``--history``).

        Raises:
            JobNotFound: no configured job and no ghost has that name.
        """
        return inspection.job_runs(self.settings, self.jobs, session.state, name, limit)

    def rerun_groups(self, session: Session, runs: Any) -> list[Any]:
        """The reruns among a job's ``runs`` (``RunView``s, newest first), each whole
        (:func:`crontabber.inspection.rerun_groups`)."""
        return inspection.rerun_groups(self.settings, session.state, runs)

    def metric_runs(self, session: Session, app_name: str, limit: int = METRIC_RUNS) -> list[Any]:
        """The job's newest ``limit`` runs in the run ledger, newest first, with the metrics
        each returned (``RunRecord``s, without output): what its metric charts draw."""
        return session.state.recent_runs(app_name, limit)

    def run_output(self, session: Session, name: str, run_id: int | None = None) -> Any:
        """Run ``run_id`` of the job (its newest when None) from the run ledger, with what
        it logged and printed (``--logs``); None when the ledger has no such run.

        Raises:
            JobNotFound: no configured job and no ghost has that name.
        """
        app_name, _ = inspection.known_name(self.jobs, session.state, name)
        return session.state.run_output(app_name, run_id)

    def history_document(self, session: Session, name: str) -> dict[str, Any]:
        """``--history NAME --json``."""
        return self.runs(session, name).as_json()

    def alerts_document(self, session: Session, limit: int = 20) -> dict[str, Any]:
        """``{"now", "enabled", "mutes", "held_back", "alerts"}``: ``--alerts --json``'s alerts
        (newest first, each with its notices: sent, or the error, attempts and next attempt),
        the maintenance windows in force and what they hold back now (each muted job's
        failing, silent or late condition: ``--alerts``' ``not alerted (muted)`` lines)."""
        from crontabber.alerts.alerter import Alerter
        from crontabber.alerts.store import AlertStore

        alerts = AlertStore(session.state)
        now, mutes = session.state.now(), alerts.mutes()
        held = (
            Alerter(self.settings, self.jobs, session.state, "dashboard").held_back(
                session.state.states(), now, mutes
            )
            if mutes
            else []
        )
        return {
            "now": now,
            "enabled": self.settings.alerts.enabled,
            "mutes": [window._asdict() for window in mutes],
            "held_back": [{"job": e.app_name, "kind": e.kind, "message": e.message} for e in held],
            "alerts": alerts.alerts(None, limit),
        }

    def fleet_document(self, session: Session) -> dict[str, Any]:
        """``{"now", "check": <--nagios --json>, "hosts": [...]}``: every host
        that ever ticked, newest tick first, ``recent`` when it ticked within
        ``silence_critical_minutes`` (the fleet the check counts), its tags, and ``drain``
        when drained (``draining: N runs left (until ... by ...: reason)``, then ``drained
        ...``)."""
        overview = session.state.overview()
        marker = markers_from_here(lease_rules(self.settings))
        limits = self.settings.monitor
        check = nagios.nagios_check(
            self.jobs,
            overview.states,
            overview.hosts,
            overview.now,
            lambda state: marker(state, overview.now),
            limits,
            missed_deadlines(self.jobs, self.settings, overview.states, overview.now),
            {entry.name: entry.problem for entry in self.broken},
            overview.errors,
            self.settings.lease_seconds,
        )
        recent = {host.host for host in nagios.recent_hosts(overview.hosts, overview.now, limits)}
        hosts = sorted(overview.hosts, key=lambda host: host.last_tick, reverse=True)
        return {
            "now": overview.now,
            "check": check.as_json(),
            "max_skew_seconds": limits.max_skew_seconds,
            "hosts": [
                {
                    "host": h.host,
                    "version": h.version,
                    "pid": h.pid,
                    "last_tick": h.last_tick,
                    "skew_seconds": h.skew_seconds,
                    "schema_behind": list(h.schema_behind),
                    "tags": list(h.tags),
                    "drain": (
                        drain_line(h, overview.states).split(": ", 1)[1] if h.drained else None
                    ),
                    "recent": h.host in recent,
                    "serving": h.serve_seconds,
                    "gone": h.gone(overview.now, self.settings.lease_seconds),
                }
                for h in hosts
            ],
        }
