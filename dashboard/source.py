"""Where the dashboard's data comes from: the runner's settings and jobs, read
once, and per request one read-only database session. It reads the runner only through
:mod:`crontabber.inspection`.

Every document has the shape of the command line's ``--json`` where the
command line has one, built by the same functions:

- ``jobs``: ``--list-jobs --json`` (:func:`crontabber.inspection.job_views_now`);
- ``history``: ``--history NAME --json`` (:func:`crontabber.inspection.job_runs`);
- a job's metric charts: its last runs in the run ledger
  (:func:`crontabber.inspection.metric_runs`, what the run checks judge against), each with
  the metrics it returned;
- ``fleet``: ``--nagios --json`` plus every host of ``crontabber_host`` (what
  ``--metrics-file`` exports: :func:`crontabber.inspection.fleet_document`);
- ``alerts``: ``--alerts --json`` (:func:`crontabber.inspection.alerts_document`);
- ``pipeline``: the panels (no command shows them): see :mod:`dashboard.pipeline`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import threading
from typing import Any, Iterator, Mapping

from crontabber import inspection
from crontabber.inspection import (
    BrokenEntry,
    Job,
    Settings,
    StateStore,
    load_catalog,
    load_settings,
)

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
        with inspection.read_only_session(self.settings, "dashboard") as (conn, state):
            yield Session(conn, state, PipelineStore(conn, self.settings.database.target))

    # ------------------------------------------------------------------ documents

    def jobs_views(self, session: Session) -> tuple[list[Any], dt.datetime]:
        """Every configured job's view and the database clock (``--list-jobs``)."""
        return inspection.job_views_now(self.settings, self.jobs, session.state, (), self.broken)

    def job_view(self, session: Session, app_name: str) -> tuple[Any, dt.datetime]:
        """The view of the configured job ``app_name`` (None for a ghost) and the database
        clock (``--list-jobs NAME``)."""
        return inspection.job_view_now(self.settings, self.jobs, session.state, app_name)

    def jobs_document(self, session: Session) -> dict[str, Any]:
        """``--list-jobs --json``."""
        found, now = self.jobs_views(session)
        return inspection.jobs_document(found, now)

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
        return inspection.metric_runs(session.state, app_name, limit)

    def run_output(self, session: Session, name: str, run_id: int | None = None) -> Any:
        """Run ``run_id`` of the job (its newest when None) from the run ledger, with what
        it logged and printed (``--logs``); None when the ledger has no such run.

        Raises:
            JobNotFound: no configured job and no ghost has that name.
        """
        app_name, _ = inspection.known_name(self.jobs, session.state, name)
        return inspection.run_output(session.state, app_name, run_id)

    def history_document(self, session: Session, name: str) -> dict[str, Any]:
        """``--history NAME --json``."""
        return self.runs(session, name).as_json()

    def alerts_document(self, session: Session, limit: int = 20) -> dict[str, Any]:
        """``--alerts --json``'s alerts, the maintenance windows and what they hold back
        (:func:`crontabber.inspection.alerts_document`)."""
        return inspection.alerts_document(self.settings, self.jobs, session.state, limit)

    def fleet_document(self, session: Session) -> dict[str, Any]:
        """``--nagios --json`` and every host that ever ticked
        (:func:`crontabber.inspection.fleet_document`)."""
        return inspection.fleet_document(self.settings, self.jobs, self.broken, session.state)
