"""``--serve``: a runner that stays up. Every ``tick_seconds`` it makes a pass over the jobs
as a cron tick does (:meth:`crontabber.runner.Runner.run_pass`: the tick recorded, so the
host stays live in the fleet; the due jobs claimed, up to ``max_parallel_jobs`` at once),
and the jobs that fall due while others run start beside them: the runs of one pass stay in
flight across the next ones, served by one supervisor loop. Servers and cron ticks share one
fleet: the row locks and the fencing decide who runs what, as between ticks.

A change of the configuration file is picked up at the next pass (the runs in flight end
as they began); a change that does not load is refused in one line, logged, and the server
goes on with the configuration it has.

SIGTERM or SIGINT (``systemctl stop``, a Kubernetes pod's end, Ctrl-C): nothing new is
claimed; the runs in flight get up to ``kill_grace_seconds`` to end by themselves, then they
are stopped (SIGTERM to each job, SIGKILL after the grace) and recorded as stopped by signal.
A second signal stops them at once. The server exits 0 when every run ended by itself, 143
when it had to stop some.
"""

from __future__ import annotations

import logging
import os
import signal
import time

from .config.catalog import BrokenEntry, Job, load_catalog
from .config.settings import Settings, load_settings
from .errors import ConfigurationError, CrontabberError, Terminated
from .identity import this_host
from .runner import Flight, Runner
from .store import StateStore
from .tick import after_runs, fleet_tick, refuse_older_code, tick_alerts, write_metrics

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Mapping

    from .runner import Reporters

logger = logging.getLogger("crontabber")


class Stopping:
    """The server's signals: the first SIGTERM/SIGINT asks it to stop (``since``: when, on
    the monotonic clock); a second one raises :class:`Terminated` (the runs are stopped at
    once, each recorded)."""

    def __init__(self) -> None:
        self.since: float | None = None

    def __call__(self, signum: int, frame: object) -> None:
        if self.since is not None:
            raise Terminated(signum)
        self.since = time.monotonic()
        logger.info(
            "signal %s: stopping: nothing new is claimed; the runs in flight may end", signum
        )

    def asked(self) -> bool:
        return self.since is not None

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self)
        signal.signal(signal.SIGINT, self)


class Configuration:
    """The configuration a server runs with, read again when its file changes: its settings,
    its jobs and the jobs entries that do not load."""

    def __init__(
        self,
        conf: str | None,
        overrides: Mapping[str, str],
        settings: Settings,
        jobs: list[Job],
        broken: list[BrokenEntry],
    ) -> None:
        self.conf, self.overrides = conf, overrides
        self.settings, self.jobs, self.broken = settings, jobs, broken
        self._stamp = _stamp(conf)

    def refresh(self) -> None:
        """Read the configuration again when its file changed; a change that does not load is
        refused in one line (logged) and the one in force stays."""
        stamp = _stamp(self.conf)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            settings = load_settings(self.conf, self.overrides, ini_cache=False)
            catalog = load_catalog(settings)
        except ConfigurationError as exc:
            logger.error(
                "configuration change refused: %s; going on with the configuration in force", exc
            )
            return
        self.settings, self.jobs, self.broken = settings, catalog.jobs, catalog.broken
        logger.info("configuration read again: %d jobs", len(self.jobs))


def _stamp(conf: str | None) -> tuple[int, int, int] | None:
    """The configuration file as a change would show: its inode, size and modification time."""
    if not conf:
        return None
    try:
        found = os.stat(conf)
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def serve(
    config: Configuration,
    store: StateStore,
    *,
    metrics_file: Callable[[Settings], str] = lambda settings: "",
    reporters: Callable[[], Reporters] | None = None,
    stopping: Stopping | None = None,
) -> int:
    """Serve until asked to stop (see the module docstring); the exit code: 0 when every run
    ended by itself, 143 when some were stopped.

    Raises:
        CodeOlderThanSchema: this host's code is older than the database's schema (as a tick:
            recorded, alerted, nothing claimed; exit 8).
    """
    stopping = stopping or Stopping()
    stopping.install()
    reporting = reporters() if reporters is not None else None
    flight = Flight()
    logger.info(
        "serving: a pass every %g s, up to %d jobs at once",
        config.settings.tick_seconds,
        config.settings.max_parallel_jobs,
    )
    runner = None
    while not stopping.asked():
        started = time.monotonic()
        config.refresh()
        runner = _pass(config, store, flight, stopping, reporting, metrics_file)
        if flight.interrupt is not None:  # a second signal, or a job's own Ctrl-C
            break
        _idle_until(started + config.settings.tick_seconds, flight, stopping)
    return _stop(config.settings, runner, flight, stopping)


def _pass(
    config: Configuration,
    store: StateStore,
    flight: Flight,
    stopping: Stopping,
    reporters: Reporters | None,
    metrics_file: Callable[[Settings], str],
) -> Runner:
    """One pass of the server: a tick's record and claims, the runs of this pass started
    beside those in flight, the checks and the alerts, the metrics file."""
    settings, jobs = config.settings, config.jobs
    alerts = tick_alerts(settings, jobs, store)
    refuse_older_code(settings, store, alerts)
    runner = Runner(
        settings,
        jobs,
        store,
        reporters=reporters,
        host=this_host(),
        tick=fleet_tick(settings, serving=True),
        on_takeover=alerts.takeover if alerts is not None else None,
    )
    try:
        if alerts is not None:  # (as a tick: told once across the fleet, ended once loaded)
            alerts.broken(list(config.broken))
        results = runner.run_pass(flight, stop=stopping.asked)
        after_runs(settings, jobs, store, runner, results, alerts)
        write_metrics(settings, jobs, store, metrics_file(settings))
    except CrontabberError as exc:  # the database away, a metrics file: the next pass tries again
        logger.error("pass not completed: %s", exc)
    return runner


def _idle_until(when: float, flight: Flight, stopping: Stopping) -> None:
    """Wait for the next pass while nothing is in flight (a pass with runs in flight returns
    at its end: the next one starts at once), waking at once when asked to stop."""
    while not flight.launches and not stopping.asked() and time.monotonic() < when:
        time.sleep(min(0.2, max(0.0, when - time.monotonic())))


def _stop(settings: Settings, runner: Runner | None, flight: Flight, stopping: Stopping) -> int:
    """Let the runs in flight end for up to ``kill_grace_seconds``, then stop them (each
    recorded as stopped by signal); 0 when every run ended by itself, else 143."""
    stopped = False
    if runner is not None and flight.launches:
        deadline = (stopping.since or time.monotonic()) + settings.kill_grace_seconds
        logger.info(
            "%d run(s) in flight: up to %g s to end",
            len(flight.launches),
            settings.kill_grace_seconds,
        )
        while flight.launches:
            if time.monotonic() >= deadline and flight.interrupt is None:
                logger.warning("stopping the %d run(s) still in flight", len(flight.launches))
                flight.loop.stop(Terminated(signal.SIGTERM))
                stopped = True
            ended = runner.land(flight, None if flight.interrupt is not None else deadline)
            for result in ended:
                logger.info(
                    "%s: %s", result.app_name, result.status.value, extra={"job": result.app_name}
                )
    stopped = stopped or flight.interrupt is not None
    logger.info("stopped serving")
    return 143 if stopped else 0
