"""A cron tick, whole: what this host records of itself, the schedule changes (a job's
next run recomputed once: :mod:`crontabber.schedule_store`), every due job run
(:class:`crontabber.runner.Runner`), then the after-steps: the alerts (when targets are
configured: :class:`crontabber.alerts.sweep.TickAlerts`) and the metrics file. The command
line (:func:`crontabber.cli.run.run_all`) parses, calls :func:`run_tick` and turns what it
returns into an exit code.

The alerts are imported only when targets are configured, the metrics only when a file is
(an idle cron tick without them loads neither).
"""

from __future__ import annotations

import contextlib
import logging
import os

from . import version
from .config.catalog import BrokenEntry, Job
from .config.settings import Settings
from .errors import CodeOlderThanSchema
from .identity import default_holder, this_host
from .runner import JobResult, Runner, Status, lease_rules, markers_from_here, pid_alive
from .state import Tick
from .store import StateStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, ContextManager, Sequence

    from .alerts.alerter import Alerter
    from .alerts.sweep import TickAlerts
    from .runner import Reporters

logger = logging.getLogger("crontabber")


def fleet_tick(
    settings: Settings, schema_behind: tuple[int, ...] = (), serving: bool = False
) -> Tick:
    """What this invocation records in ``crontabber_host`` when it runs as a cron tick
    (``schema_behind``: the database's migrations its code lacks; its tags), and how recent
    a tick makes a host live (``silence_critical_minutes``, as ``--nagios``); ``serving``: a
    server's pass (it records its ``tick_seconds``: silent longer than that and a lease, it
    is gone). The version is the build's, or a checkout's commit
    (:func:`crontabber.version.recorded`): a tick never runs git."""
    return Tick(
        this_host(),
        version.recorded(),
        os.getpid(),
        schema_behind,
        settings.host_tags,
        settings.monitor.silence_critical_minutes * 60,
        settings.lease_seconds,
        settings.tick_seconds if serving else 0.0,
    )


def run_tick(
    settings: Settings,
    jobs: list[Job],
    store: StateStore,
    *,
    broken: Sequence[BrokenEntry] = (),
    metrics_file: str = "",
    reporters: Callable[[], Reporters] | None = None,
    guard: Callable[[], ContextManager[Any]] = contextlib.nullcontext,
) -> list[JobResult]:
    """Run a cron tick: record it, run every due job, then the alerts (when targets are
    configured) and the metrics file (``metrics_file``, '' for none). ``broken``: the jobs
    entries that did not load (the ``broken-entry`` alert tells of them; the other jobs
    run); ``reporters()``: the runner's Sentry reporters (errors, Crons check-ins), made once
    the tick is past the schema check; ``guard``: held around the runs and the alerts (the
    command line's SIGTERM guard).

    Returns:
        each due job's result (failed and skipped ones too: recorded).

    Raises:
        CodeOlderThanSchema: this host's code is older than the database's schema: the tick
            is recorded with the migrations it lacks, the ``old-code`` alert raised, and
            nothing claimed (exit 8).
        MetricsFileNotWritten: the metrics file could not be written.
    """
    alerts = tick_alerts(settings, jobs, store)
    refuse_older_code(settings, store, alerts)
    _record_schedules(jobs, store)
    runner = Runner(
        settings,
        jobs,
        store,
        reporters=reporters() if reporters is not None else None,
        host=this_host(),
        tick=fleet_tick(settings),  # a tick records itself: --nagios watches
        on_takeover=alerts.takeover if alerts is not None else None,
    )
    with guard():
        if alerts is not None:  # before the jobs: a long run delays nothing
            alerts.broken(list(broken))
        results = runner.run_all()
        after_runs(settings, jobs, store, runner, results, alerts)
    _log_done(results, broken)
    write_metrics(settings, jobs, store, metrics_file)
    return results


def _log_done(results: Sequence[JobResult], broken: Sequence[BrokenEntry]) -> None:
    """Log the tick's end in one line: how many runs ended in each status, and how many
    jobs entries did not load (``done: 2 ran, 1 skipped``; ``no jobs`` for none)."""
    counts = {status: sum(r.status is status for r in results) for status in Status}
    done = [f"{n} {s.value}" for s, n in counts.items() if n]
    done += [f"{len(broken)} jobs entry not loaded"] if broken else []
    logger.info("done: %s", ", ".join(done) or "no jobs")


def refuse_older_code(settings: Settings, store: StateStore, alerts: TickAlerts | None) -> None:
    """A tick's (or a server pass's) first step: code older than the database's schema is
    recorded in its host's row with the migrations it lacks, alerted (``old-code``) and refused.

    Raises:
        CodeOlderThanSchema: this host's code is older than the schema (exit 8).
    """
    if not store.unknown_migrations:
        return
    tick = fleet_tick(settings, store.unknown_migrations)
    store.tick(tick)
    if alerts is not None:
        alerts.old_code(tick.host, tick.schema_behind)
    raise CodeOlderThanSchema(this_host(), store.unknown_migrations)


def after_runs(
    settings: Settings,
    jobs: list[Job],
    store: StateStore,
    runner: Runner,
    results: list[JobResult],
    alerts: TickAlerts | None,
) -> None:
    """What a tick (or a server's pass) does once its runs are recorded: the checks of the
    runs that succeeded, then the alerts over every job (when targets are configured)."""
    _check_runs(settings, jobs, store, results, alerts)
    if alerts is not None:
        alerts.tick(*runner.snapshot(), runner.fleet)


def tick_alerts(settings: Settings, jobs: list[Job], store: StateStore) -> TickAlerts | None:
    """The tick's alert step, or None without alert targets (:func:`_alerts`)."""
    return _alerts(settings, jobs, store) if settings.alerts.enabled else None


def _record_schedules(jobs: list[Job], store: StateStore) -> None:
    """A job whose schedule changed gets its next run recomputed once, audited
    (:mod:`crontabber.schedule_store`): looked at when a job has a cron expression or a zone
    (a jobs list of crontabber's form in UTC, as crontabber's, never changes form). A
    database error is logged: the tick goes on."""
    if not any(job.schedule.is_cron or job.schedule.zoned for job in jobs):
        return
    from .errors import CrontabberError
    from .schedule_store import record_schedules

    try:
        for entry in record_schedules(store, jobs):
            logger.info("%s: %s", entry.app_name, entry.reason, extra={"app_name": entry.app_name})
    except CrontabberError as exc:
        logger.error("schedule changes not recorded: %s", exc)


def _check_runs(
    settings: Settings,
    jobs: list[Job],
    store: StateStore,
    results: list[JobResult],
    alerts: TickAlerts | None,
) -> None:
    """The checks of the runs that succeeded in this tick (:mod:`crontabber.alerts.checks`,
    imported only when one did: an idle tick runs nothing); a breach is alerted when
    targets are configured. A database error is logged: the tick's runs are recorded."""
    ran = {r.app_name: r.run_id for r in results if r.status is Status.RAN and r.run_id is not None}
    if not ran:
        return
    from .alerts.checks import check_runs
    from .errors import CrontabberError

    try:
        check_runs(
            settings,
            jobs,
            store,
            ran,
            default_holder(),
            (lambda event: alerts.alerter().breach(event)) if alerts is not None else None,
            alerts.checks_passed if alerts is not None else None,
        )
    except CrontabberError as exc:
        logger.error("checks not evaluated: %s", exc)


def _alerts(settings: Settings, jobs: list[Job], store: StateStore) -> TickAlerts:
    """The tick's alert step (:class:`crontabber.alerts.sweep.TickAlerts`), imported only
    where targets are configured; its alerter (the rules) only when it needs one."""
    from .alerts.sweep import TickAlerts

    holder = default_holder()

    def alerter() -> Alerter:
        from .alerts.alerter import tick_alerter

        rules = lease_rules(settings, this_host())
        marker = markers_from_here(rules)
        return tick_alerter(settings, jobs, store, holder, rules, marker)

    return TickAlerts(settings, jobs, store, holder, pid_alive, alerter)


def write_metrics(settings: Settings, jobs: list[Job], store: StateStore, path: str) -> None:
    """After a tick: read the state once more (the jobs it ran changed it) and
    replace the metrics file ``path``, if one is given ('' for none).

    Raises:
        MetricsFileNotWritten: the file could not be written.
        DatabaseUnavailable: the state could not be read.
    """
    if not path:
        return
    from .alerts.rules import missed_deadlines
    from .metrics import render_textfile, write_atomically

    overview = store.overview([job.app_name for job in jobs])
    missed = missed_deadlines(jobs, settings, overview.states, overview.now)
    write_atomically(path, render_textfile(jobs, overview, missed))
