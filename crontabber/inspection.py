"""Gather what the inspection commands and the dashboard show, from the state store: each
job's view judged at the database clock, a job's runs (the log and the run ledger), one run,
the job a name means (a configured job or a ghost), the fleet and the alerts. The data types
are :mod:`crontabber.views`'; the text is :mod:`crontabber.render`'. Not imported by a cron
tick.

This module is the dashboard's whole view of the runner (docs/architecture.md, "The public
surface"): besides its functions, it gives the settings and the jobs (:func:`load_settings`,
:func:`load_catalog`, :func:`job_config`), the view types and their text, and
:func:`read_only_session`, the one way the dashboard reaches the state database.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from . import nagios
from .alerts.rules import ENDING, LASTING, deadline_events, missed_deadlines
from .config.catalog import BrokenEntry, Job, find_job, job_config, load_catalog
from .config.settings import Settings, load_settings
from .connection import connect
from .errors import ConfigurationError, JobNotFound, RunNotFound
from .leases import Marker
from .placement import drain_line, drains_of, unplaced
from .render import detail, rerun_group_lines, short_host
from .state import JobState
from .store import StateStore
from .views import JobStatus, JobView, Outcome, RunView, jobs_document

if TYPE_CHECKING:
    from .records import HostState, Overview, RunRecord
    from .reruns.plan import RerunGroup

__all__ = [
    # the functions of this module
    "DEFAULT_OVERDUE_SECONDS",
    "JobRuns",
    "alerts_document",
    "fleet_document",
    "job_runs",
    "job_view_now",
    "job_views_now",
    "known_name",
    "marker_of",
    "metric_runs",
    "one_run",
    "read_only_session",
    "rerun_groups",
    "run_output",
    "selected_jobs",
    # what they take and give, from the modules that define them
    "BrokenEntry",
    "ENDING",
    "Job",
    "JobStatus",
    "JobView",
    "LASTING",
    "Marker",
    "Outcome",
    "RunView",
    "Settings",
    "StateStore",
    "detail",
    "job_config",
    "jobs_document",
    "load_catalog",
    "load_settings",
    "rerun_group_lines",
    "short_host",
]


# How late a due job may be before --list-jobs calls it overdue: --nagios's
# warning threshold (crontabber.overdue_warning_seconds, in settings.monitor
# where that exists), else its default: a tick every few minutes makes any
# job a little late.
DEFAULT_OVERDUE_SECONDS = 1800.0


def marker_of(settings: Settings) -> Callable[[JobState | None, dt.datetime], Marker]:
    """The runner's classification of ``ongoing`` markers, from this host."""
    from .identity import this_host
    from .runner import lease_rules, markers_from_here

    return markers_from_here(lease_rules(settings, this_host()))


def _overdue_seconds(settings: Settings) -> float:
    monitor = getattr(settings, "monitor", None)
    return float(getattr(monitor, "overdue_warning_seconds", DEFAULT_OVERDUE_SECONDS))


def selected_jobs(jobs: list[Job], names: list[str]) -> list[Job]:
    """The jobs ``names`` mean (app names or class paths), in config order;
    every job when ``names`` is empty.

    Raises:
        JobNotFound: a name that no configured job has.
    """
    if not names:
        return jobs
    chosen = set()
    for name in names:
        job = find_job(jobs, name)
        if job is None:
            raise JobNotFound(name, [j.app_name for j in jobs])
        chosen.add(job.app_name)
    return [job for job in jobs if job.app_name in chosen]


def job_views_now(
    settings: Settings,
    jobs: list[Job],
    store: StateStore,
    names: list[str] | tuple[str, ...] = (),
    broken: Sequence[BrokenEntry] = (),
) -> tuple[list[JobView], dt.datetime]:
    """The views of the jobs ``names`` mean (every job when empty), in config
    order, then those of the ``broken`` entries they mean (status ``broken``), and the
    database clock they were judged at: what ``--list-jobs`` shows and the dashboard serves.

    Raises:
        JobNotFound: a name that no configured job and no broken entry has.
    """
    from . import views

    asked = list(names)
    shown = [b for b in broken if not asked or any(b.matches(name) for name in asked)]
    rest = [name for name in asked if not any(b.matches(name) for b in shown)]
    chosen = jobs if not asked else selected_jobs(jobs, rest) if rest else []
    states, now = store.states(), store.now()
    marker = marker_of(settings)
    missed = {
        name: views.DeadlineView(event.detail["interval"], event.detail["deadline"])
        for name, event in deadline_events(chosen, settings, states, now).items()
    }
    no_host = {}
    if any(job.hosts for job in chosen):  # the fleet is read only where placement matters
        fleet = store.fleet(settings.monitor.silence_critical_minutes * 60)
        no_host = unplaced(chosen, fleet)
        if no_host and any(host.drained for host in fleet):  # which drain: one read more
            no_host = unplaced(chosen, fleet, drains_of(store.hosts()))
    failing = [
        job.app_name
        for job in chosen
        if (s := states.get(job.app_name)) is not None and s.error_count
    ]
    errors = store.last_errors(failing)  # no query when none fails
    found = views.job_views(
        chosen,
        states,
        now,
        lambda state: marker(state, now),
        _overdue_seconds(settings),
        missed,
        no_host,
        errors,
    )
    return found + [views.broken_view(b) for b in shown], now


def job_view_now(
    settings: Settings, jobs: list[Job], store: StateStore, app_name: str
) -> tuple[JobView | None, dt.datetime]:
    """The view of the configured job ``app_name`` (None for a ghost or an unknown name) and
    the database clock (``--list-jobs NAME``)."""
    if all(job.app_name != app_name for job in jobs):
        return None, store.now()
    found, now = job_views_now(settings, jobs, store, [app_name])
    return found[0], now


def known_name(jobs: list[Job], store: StateStore, name: str) -> tuple[str, Job | None]:
    """The app name a command means: a configured job's, or a ghost's (a job
    taken out of the configuration whose state row or log rows remain).

    Raises:
        JobNotFound: neither.
    """
    job = find_job(jobs, name)
    if job is not None:
        return job.app_name, job
    if store.state(name) is None and not store.log_runs(name, 0):  # 0: one run, if any
        raise JobNotFound(name, [j.app_name for j in jobs])
    return name, None


@dataclass(frozen=True)
class JobRuns:
    """A job's newest runs as ``--history`` shows them: ``more`` says whether
    older runs exist beyond the limit; ``now`` is the database clock."""

    app_name: str
    is_backfill: bool
    runs: list[RunView]
    more: bool
    now: dt.datetime

    def as_json(self) -> dict[str, Any]:
        """The ``--history --json`` document."""
        from .views import history_document

        return history_document(self.app_name, self.runs, self.now, self.more, self.is_backfill)


def job_runs(
    settings: Settings, jobs: list[Job], store: StateStore, name: str, limit: int
) -> JobRuns:
    """The newest ``limit`` runs of the job ``name`` means (a configured job
    or a ghost), newest first: what ``--history`` shows and the dashboard serves.

    Raises:
        ConfigurationError: ``limit`` below 1.
        JobNotFound: neither a configured job nor a ghost has that name.
    """
    from . import views

    if limit < 1:
        raise ConfigurationError("--limit", f"must be a number of runs, 1 or more, not {limit}")
    app_name, job = known_name(jobs, store, name)
    is_backfill = job.is_backfill if job is not None else False
    entries, state, now = store.log_runs(app_name, limit), store.state(app_name), store.now()
    run_ids = {entry.run_id for entry in entries if entry.run_id is not None}
    if state is not None and state.ongoing is not None and state.run_id is not None:
        run_ids.add(state.run_id)
    records = store.run_records(app_name, sorted(run_ids))
    # the newest runs of the ledger too: a rerun's joiners killed before they logged anything
    records.update({record.run_id: record for record in store.recent_runs(app_name, limit)})
    marker = marker_of(settings)
    runs = views.group_runs(entries, state, lambda s: marker(s, now), records)
    return JobRuns(app_name, is_backfill, runs[:limit], len(runs) > limit, now)


def one_run(
    settings: Settings, jobs: list[Job], store: StateStore, name: str, run_id: int
) -> JobRuns:
    """Run ``run_id`` of the job ``name``, with every log row.

    Raises:
        JobNotFound: neither a configured job nor a ghost has that name.
        RunNotFound: neither the log nor the run ledger has that run.
    """
    from . import views

    app_name, job = known_name(jobs, store, name)
    entries = list(reversed(store.run_log(app_name, run_id)))
    records = store.run_records(app_name, [run_id])
    state, now = store.state(app_name), store.now()
    holding = state if state is not None and state.run_id == run_id else None
    if not entries and not records and (holding is None or holding.ongoing is None):
        raise RunNotFound(app_name, run_id)
    marker = marker_of(settings)
    runs = views.group_runs(entries, holding, lambda s: marker(s, now), records)
    if not runs and run_id in records:  # in the ledger only: claimed, then nothing logged
        runs = [views.record_run(records[run_id])]
    return JobRuns(app_name, job.is_backfill if job is not None else False, runs, False, now)


def rerun_groups(
    settings: Settings, store: StateStore, runs: Sequence[RunView], limit: int = 3
) -> list[RerunGroup]:
    """The reruns the runs ``runs`` (newest first) worked on, each whole (its plan, what it
    finished, every run of it, what is left: ``--history NAME --run ID``'s grouped view), the
    newest first, at most ``limit``: a job page's account of what a killed rerun did."""
    from .reruns.store import RerunStore

    found: list[RerunGroup] = []
    seen: set[int] = set()
    reruns = RerunStore(store)
    for run in runs:
        if len(found) >= limit:
            break
        if run.kind != "rerun" or run.run_id is None or run.run_id in seen:
            continue
        group = reruns.rerun_group(run.run_id, settings.lease_seconds)
        if group is None:
            continue
        seen |= {member.run_id for member in group.runs}
        found.append(group)
    return found


def metric_runs(store: StateStore, app_name: str, limit: int) -> list[RunRecord]:
    """The job's newest ``limit`` runs in the run ledger, newest first, with the metrics each
    returned (without output): what the run checks judge and a job's metric charts draw."""
    return store.recent_runs(app_name, limit)


def run_output(store: StateStore, app_name: str, run_id: int | None = None) -> RunRecord | None:
    """Run ``run_id`` of the job ``app_name`` (its newest when None) from the run ledger, with
    what it logged and printed (``--logs``); None when the ledger has no such run."""
    return store.run_output(app_name, run_id)


@contextlib.contextmanager
def read_only_session(
    settings: Settings, application_name: str
) -> Iterator[tuple[Any, StateStore]]:
    """A read-only connection to the state database and the state store over it, closed on
    leaving: whatever reads through it cannot change anything, even by mistake (the
    dashboard's connection for one request; its own stores may read through it too).

    Raises:
        DatabaseUnavailable: the database cannot be reached.
    """
    db = settings.database
    conn = connect(db, application_name=application_name)
    try:
        conn.set_session(readonly=True)
        yield conn, StateStore(conn, db)
    finally:
        conn.close()


def alerts_document(
    settings: Settings, jobs: list[Job], store: StateStore, limit: int = 20
) -> dict[str, Any]:
    """``{"now", "enabled", "mutes", "held_back", "alerts"}``: ``--alerts --json``'s alerts
    (newest first, each with its notices: sent, or the error, attempts and next attempt),
    the maintenance windows in force and what they hold back now (each muted job's
    failing, silent or late condition: ``--alerts``' ``not alerted (muted)`` lines)."""
    from .alerts.alerter import Alerter
    from .alerts.store import AlertStore

    alerts = AlertStore(store)
    now, mutes = store.now(), alerts.mutes()
    held = (
        Alerter(settings, jobs, store, "dashboard").held_back(store.states(), now, mutes)
        if mutes
        else []
    )
    return {
        "now": now,
        "enabled": settings.alerts.enabled,
        "mutes": [window._asdict() for window in mutes],
        "held_back": [{"job": e.app_name, "kind": e.kind, "message": e.message} for e in held],
        "alerts": alerts.alerts(None, limit),
    }


def fleet_document(
    settings: Settings, jobs: list[Job], broken: Sequence[BrokenEntry], store: StateStore
) -> dict[str, Any]:
    """``{"now", "check": <--nagios --json>, "hosts": [...]}``: every host
    that ever ticked, newest tick first, ``recent`` when it ticked within
    ``silence_critical_minutes`` (the fleet the check counts), its tags, and ``drain``
    when drained (``draining: N runs left (until ... by ...: reason)``, then ``drained
    ...``)."""
    from .runner import lease_rules, markers_from_here

    overview = store.overview()
    marker = markers_from_here(lease_rules(settings))
    limits = settings.monitor
    check = nagios.nagios_check(
        jobs,
        overview.states,
        overview.hosts,
        overview.now,
        lambda state: marker(state, overview.now),
        limits,
        missed_deadlines(jobs, settings, overview.states, overview.now),
        {entry.name: entry.problem for entry in broken},
        overview.errors,
        settings.lease_seconds,
    )
    recent = {host.host for host in nagios.recent_hosts(overview.hosts, overview.now, limits)}
    return {
        "now": overview.now,
        "check": check.as_json(),
        "max_skew_seconds": limits.max_skew_seconds,
        "hosts": [
            _host_document(h, overview, h.host in recent, settings.lease_seconds)
            for h in sorted(overview.hosts, key=lambda host: host.last_tick, reverse=True)
        ],
    }


def _host_document(
    h: HostState, overview: Overview, recent: bool, lease_seconds: float
) -> dict[str, Any]:
    """One host of :func:`fleet_document`: ``recent`` when the check counts it."""
    return {
        "host": h.host,
        "version": h.version,
        "pid": h.pid,
        "last_tick": h.last_tick,
        "skew_seconds": h.skew_seconds,
        "schema_behind": list(h.schema_behind),
        "tags": list(h.tags),
        "drain": (drain_line(h, overview.states).split(": ", 1)[1] if h.drained else None),
        "recent": recent,
        "serving": h.serve_seconds,
        "gone": h.gone(overview.now, lease_seconds),
    }
