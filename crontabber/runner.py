"""Run due jobs: the due and dependency checks, the lock, the job, the
bookkeeping. All state goes through :class:`~crontabber.store.StateStore`;
"now" is always the database's clock.

The lock is taken in one transaction (see ``StateStore.claim``): the row is
locked with ``FOR UPDATE NOWAIT`` (contention: :class:`JobLocked`, exit 2),
its ``ongoing`` marker checked (held and not stale: :class:`JobOngoing`,
exit 3) and set. The marker is cleared in a ``finally``, whatever ends the
attempt: an exception, KeyboardInterrupt or SIGTERM (raised as
:class:`Terminated` by the CLI).
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
import os
import socket
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from .catalog import Job, job_config, run_order
from .config import Settings
from .errors import JobLockError, JobLocked, JobOngoing, Terminated
from .scheduling import dependency_block, is_due, next_run_after, ongoing_is_stale
from .state import JobState, Outcome
from .store import StateStore

logger = logging.getLogger(__name__)


class Status(enum.Enum):
    RAN = "ran"
    FAILED = "failed"
    SKIPPED = "skipped"
    LOCKED = "locked"
    ONGOING = "ongoing"


@dataclass(frozen=True)
class JobResult:
    """What happened to one job in one invocation."""

    app_name: str
    status: Status
    detail: str = ""
    error: JobLockError | None = None


def default_holder() -> str:
    """Who holds an ongoing marker: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def error_record(exc: BaseException) -> dict[str, str]:
    """crontabber's ``last_error``: the type's repr, ``str(exc)`` and the frames."""
    return {
        "type": repr(type(exc)),
        "value": str(exc),
        "traceback": "".join(traceback.format_tb(exc.__traceback__)),
    }


NOT_DUE = "not due yet"

Reporter = Callable[[BaseException, Job], object]


def _no_report(exc: BaseException, job: Job) -> None:
    return None


class Runner:
    """Runs configured jobs against one state store."""

    def __init__(
        self,
        settings: Settings,
        jobs: list[Job],
        store: StateStore,
        report: Reporter = _no_report,
        holder: str | None = None,
    ) -> None:
        self.settings = settings
        self.jobs = jobs
        self.store = store
        self.report = report
        self.holder = holder or default_holder()
        self._snapshot: tuple[dict[str, JobState], dt.datetime] | None = None

    def _states_and_now(self) -> tuple[dict[str, JobState], dt.datetime]:
        """The state rows and the database time, read once and reused until a job is
        attempted: an idle tick costs two queries, not two per job. A stale
        snapshot is harmless: the claim re-checks under the row lock."""
        if self._snapshot is None:
            self._snapshot = (self.store.states(), self.store.now())
        return self._snapshot

    def run_all(self) -> list[JobResult]:
        """Attempt every due job in dependency order.

        A job that is locked elsewhere is reported and the others still run
        (crontabber stopped the whole tick at the first lock).
        """
        results = []
        for job in run_order(self.jobs):
            result = self.run_job(job, force=False)
            if result.error is not None:
                logger.warning("%s", result.error, extra={"job": job.app_name})
            results.append(result)
        return results

    def run_job(self, job: Job, force: bool) -> JobResult:
        """Attempt one job; ``force`` skips the due and dependency checks, not the lock."""
        try:
            return self._attempt(job, force)
        except JobLockError as exc:
            status = Status.ONGOING if isinstance(exc, JobOngoing) else Status.LOCKED
            return JobResult(job.app_name, status, str(exc), exc)

    def _attempt(self, job: Job, force: bool) -> JobResult:
        states, now = self._states_and_now()
        if not force:
            reason = self._why_not(job, states, now)
            if reason:
                # "not due" is every tick's normal case; a blocked dependency is news.
                level = logging.DEBUG if reason == NOT_DUE else logging.INFO
                logger.log(level, "skipping %s: %s", job.app_name, reason, extra={"job": job.app_name})
                return JobResult(job.app_name, Status.SKIPPED, reason)
        self._snapshot = None  # from here on the job's (or others') state may change
        claimed = self.store.claim(
            job.app_name, job.depends_on, self.holder, self._decider(job, force)
        )
        if claimed is None:
            return JobResult(job.app_name, Status.SKIPPED, "another runner just ran it")
        before, started = claimed
        logger.info("running %s", job.app_name, extra={"job": job.app_name})
        return self._execute(job, before, started)

    def _why_not(self, job: Job, states: dict[str, JobState], now: dt.datetime) -> str | None:
        if not is_due(states.get(job.app_name), job.schedule, now):
            return NOT_DUE
        return dependency_block(job.depends_on, states, now)

    def _decider(self, job: Job, force: bool) -> Callable[[JobState, dt.datetime], bool]:
        max_age = self.settings.max_ongoing_age_hours

        def decide(state: JobState, now: dt.datetime) -> bool:
            if state.ongoing is not None:
                if not ongoing_is_stale(state.ongoing, now, max_age):
                    raise JobOngoing(job.app_name, state.ongoing, state.ongoing_by)
                logger.warning(
                    "%s has been ongoing since %s (by %s), longer than %s hours: running anyway",
                    job.app_name, state.ongoing, state.ongoing_by, max_age,
                    extra={"job": job.app_name},
                )
            # Another runner may have finished it between our check and the lock.
            return force or state.next_run is None or state.next_run < now

        return decide

    def _execute(self, job: Job, before: JobState, started: dt.datetime) -> JobResult:
        try:
            failure = self._run_units(job, before, started)
        except BaseException as exc:
            # KeyboardInterrupt/Terminated outside the job's code, or the store
            # failing: still release the marker (if the database lets us).
            self._finish(job, started, exc)
            raise
        self._finish(job, started, failure)
        if failure is None:
            return JobResult(job.app_name, Status.RAN)
        if isinstance(failure, (KeyboardInterrupt, Terminated)):
            raise failure
        return JobResult(job.app_name, Status.FAILED, f"{type(failure).__name__}: {failure}")

    def _run_units(self, job: Job, before: JobState, started: dt.datetime) -> BaseException | None:
        """Run the job's ``main()``; save each unit; return the job's exception, if any.

        Errors of the store itself propagate: they are not the job's failure.
        """
        info = before.job_information() if before.last_run is not None else None
        unit_start = time.monotonic()
        try:
            instance: Any = job.cls(job_config(job, self.settings.sources), info)
            instance.started_at = started
            units = instance.main()
        except BaseException as exc:  # noqa: BLE001 - any error of the job's is recorded
            return self._record_failure(job, exc, unit_start)
        while True:
            try:
                when = next(units)
            except StopIteration:
                return None
            except BaseException as exc:  # noqa: BLE001
                return self._record_failure(job, exc, unit_start)
            self.store.record_success(job.app_name, when, _since(unit_start))
            logger.info("%s succeeded for %s", job.app_name, when, extra={"job": job.app_name})
            unit_start = time.monotonic()

    def _record_failure(self, job: Job, exc: BaseException, unit_start: float) -> BaseException:
        logger.error(
            "%s failed: %s: %s", job.app_name, type(exc).__name__, exc,
            exc_info=exc, extra={"job": job.app_name},
        )
        self.store.log_failure(job.app_name, _since(unit_start), error_record(exc), repr(exc))
        self.report(exc, job)
        return exc

    def _finish(self, job: Job, started: dt.datetime, failure: BaseException | None) -> None:
        succeeded = failure is None
        outcome = Outcome(
            started=started,
            succeeded=succeeded,
            error=error_record(failure) if failure is not None else {},
            next_run=next_run_after(
                started, job.schedule, succeeded, self.settings.error_retry_time
            ),
        )
        self.store.finish(job.app_name, outcome, job.depends_on, self.holder)


def _since(start: float) -> dt.timedelta:
    return dt.timedelta(seconds=time.monotonic() - start)


def first_lock_error(results: list[JobResult]) -> JobLockError | None:
    """The first lock met in this invocation (it decides the exit code)."""
    return next((r.error for r in results if r.error is not None), None)

