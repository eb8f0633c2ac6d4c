"""A claimed run from its launch to its recorded end (:class:`Launcher`): the job's
supervised child (:class:`crontabber.supervisor.Supervisor`) in a lane
(:mod:`crontabber.lanes`), its Sentry Crons check-ins, and its end written through the lane,
retried while the database is away. The runner (:class:`crontabber.runner.Runner`) decides
what to claim and when; this module is imported only when a job runs (never on an idle tick).
"""

from __future__ import annotations

import datetime as dt
import logging
import time

from .config.catalog import Job, job_config
from .config.settings import Settings
from .errors import CrontabberError, DatabaseUnavailable, LeaseLost
from .frozen import Frozen
from .leases import retry_delay
from .results import JobResult, Status
from .scheduling import next_run_after
from .sidebyside import runs_alone
from .state import Claim, FinishRecord, JobState, RunEnd, RunKind, RunStatus
from .store import StateStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, TypeVar

    from .lanes import Lane
    from .reruns.store import RerunStore
    from .supervisor import Failure

    T = TypeVar("T")

logger = logging.getLogger("crontabber.runner")  # the runner's lines, as before the split

#: How a run ends when SIGTERM (to the runner or the job's processes: a deploy, ``systemctl
#: stop``) stopped it (:attr:`crontabber.supervisor.Failure.kind`): recorded as "stopped by
#: signal", never counted as a failure, paging nobody; the job stays due for the next tick.
#: (A KeyboardInterrupt, which a job may raise itself, still counts.)
STOPPING = ("terminate",)


class Rerun(Frozen):
    """The rerun a run of the rerun lane works on: the first run of its group (``root``), how
    many of its intervals may run at once, and whether they are taken strictly in order (a
    job that does not declare ``parallel_reruns``)."""

    root: int
    parallel: int
    strict: bool


class Launch:
    """A claimed run of a job and its supervisor, from its claim to its recorded end."""

    def __init__(
        self, job: Job, before: JobState, claim: Claim, kind: RunKind, config: Any, supervisor: Any
    ) -> None:
        self.job, self.before, self.claim, self.kind = job, before, claim, kind
        self.config, self.supervisor = config, supervisor
        self.alone = runs_alone(job)
        self.checkin: str | None = None
        self.started = time.monotonic()


class Launcher:
    """Launches a runner's claimed runs and records their ends."""

    def __init__(
        self,
        settings: Settings,
        store: StateStore,
        reruns: Callable[[], RerunStore],
        report: Callable[[BaseException, Job], object],
        crons: Any,
        gone_here: Callable[[str], bool],
        remember: Callable[[JobState | None, dt.datetime | None], None],
    ) -> None:
        """``reruns()``: the rerun lane's store; ``report``: Sentry for a job's errors;
        ``crons``: Sentry Crons (None: off); ``gone_here(holder)``: a holder of this host
        whose process is gone; ``remember(state, now)``: what a run's end wrote, for the pass."""
        self.settings, self.store, self.reruns, self.report = settings, store, reruns, report
        self.crons, self.gone_here, self.remember = crons, gone_here, remember

    def launch(
        self, job: Job, before: JobState, claim: Claim, kind: RunKind, rerun: Rerun | None = None
    ) -> Launch:
        """The supervised run of a claimed job, not started yet (:meth:`start`)."""
        from .capture import OutputTail
        from .supervisor import Supervisor

        config = job_config(job, self.settings.sources)
        info = before.job_information() if before.last_run is not None else None

        supervisor = Supervisor(
            claim,
            self.settings.limits_for(config),
            lambda: job.cls(config, info),
            self._lane(job, claim, kind, rerun),
            report=lambda exc: self.report(exc, job),
            inherited_fds=self.store.fds(),
            tail=OutputTail(self.settings.output_tail_bytes)
            if self.settings.output_tail_bytes
            else None,
        )
        return Launch(job, before, claim, kind, config, supervisor)

    def _lane(self, job: Job, claim: Claim, kind: RunKind, rerun: Rerun | None) -> Lane:
        """The lane of the run (:mod:`crontabber.lanes`): its rerun's, else the job's row."""
        from .lanes import RerunLane, ScheduledLane

        lease = self.settings.lease_seconds
        if rerun is not None:
            return RerunLane(
                self.reruns(),
                claim,
                rerun.root,
                rerun.parallel,
                rerun.strict,
                lease,
                self.gone_here,
            )
        return ScheduledLane(
            self.store, claim, kind, job.depends_on, job.is_backfill, lease, self.gone_here
        )

    def start(self, loop: Any, launch: Launch) -> None:
        """Fork the run's child into ``loop``; a fork that failed is recorded as the run's
        failure (the job released), then raised."""
        launch.checkin = self._checkin_start(launch.job, launch.config)
        launch.started = time.monotonic()
        try:
            loop.add(launch.supervisor)
        except BaseException as exc:
            self.land(launch, self.failed(exc))
            raise

    @staticmethod
    def failed(exc: BaseException) -> Any:
        from .supervisor import Ending, Failure

        return Ending(failure=Failure.of(exc))

    def land(self, launch: Launch, ending: Any) -> JobResult:
        """Record the end of a run and close its Sentry Crons check-in."""
        ok = False
        try:
            result = self._finish(launch, ending)
            ok = result.status is Status.RAN
        finally:
            self._checkin_end(launch.job, launch.checkin, ok, launch.started)
        return result

    def _checkin_start(self, job: Job, config: Any) -> str | None:
        """Sentry Crons' ``in_progress``, when configured (its monitor from the schedule)."""
        if self.crons is None:
            return None
        from .alerts.rules import alert_rules
        from .sentry import monitor_config

        try:
            failures = alert_rules(job, self.settings.sources).after_failures
        except CrontabberError:
            failures = 1
        checkin: str | None = self.crons.start(
            job, monitor_config(job.schedule, self.settings.limits_for(config).timeout, failures)
        )
        return checkin

    def _checkin_end(self, job: Job, checkin: str | None, ok: bool, started: float) -> None:
        if self.crons is not None:
            self.crons.finish(job, checkin, ok, time.monotonic() - started)

    def _finish(self, launch: Launch, ending: Any) -> JobResult:
        """Write the end of the run through its lane (conditional on its run id), then say how
        it went; what the end writes to the state row follows :class:`RunKind`'s rule. A
        SIGINT/SIGTERM that stopped the run (``ending.interrupt``) is the caller's to raise."""
        job, claim, failure = launch.job, launch.claim, ending.failure
        outcome = _finish_record(launch, failure)
        seconds = failure.seconds if failure is not None else 0.0
        summaries = tuple(ending.summaries)
        end = RunEnd(
            status=failure.status if failure is not None else RunStatus.SUCCEEDED,
            error=failure.summary if failure is not None else None,
            output=ending.output,
            dropped=ending.dropped,
        )
        logged = (
            (dt.timedelta(seconds=seconds), failure.error, failure.exc_repr)
            if failure is not None
            else None
        )
        lane = launch.supervisor.lane
        held, state, now = self._keep_trying(
            job, claim, lambda: lane.finish(outcome, end, logged, ending.deferred)
        )
        self.remember(state, now)
        if not held:
            why = ending.fenced or "another run took the job over, or an operator released it"
            lost = LeaseLost(job.app_name, claim.run_id, why)
            logger.error("%s; its outcome was not recorded", lost, extra={"job": job.app_name})
            return JobResult(job.app_name, Status.FENCED, str(lost), lost, claim.run_id, summaries)
        if failure is None:
            ran = JobResult(job.app_name, Status.RAN, run_id=claim.run_id, summaries=summaries)
            if ran.summary and not job.is_backfill:  # a backfill unit's is logged as it is written
                logger.info("%s: %s", job.app_name, ran.summary, extra={"job": job.app_name})
            return ran
        return JobResult(
            job.app_name, Status.FAILED, failure.summary, run_id=claim.run_id, summaries=summaries
        )

    def _keep_trying(self, job: Job, claim: Claim, write: Callable[[], T]) -> T:
        """Run a state write, retrying with backoff while the database is away,
        for at most ``lease_seconds`` (after that the lease has expired anyway
        and the next runner takes the job over).

        Raises:
            DatabaseUnavailable: still unavailable at the end, with a message
                saying that the marker will expire with its lease.
        """
        deadline = time.monotonic() + self.settings.lease_seconds
        pause = 0.5
        while True:
            try:
                return write()
            except DatabaseUnavailable as exc:
                if time.monotonic() + pause > deadline:
                    raise DatabaseUnavailable(
                        exc.target,
                        f"{exc.reason}; the end of {job.app_name}'s run "
                        f"{claim.run_id} was not recorded: its marker expires with its lease",
                    ) from None
                if pause == 0.5:
                    logger.warning(
                        "%s: %s; retrying for up to %g s to record the end of run %s",
                        job.app_name,
                        exc,
                        self.settings.lease_seconds,
                        claim.run_id,
                        extra={"job": job.app_name},
                    )
                time.sleep(pause)
                pause = min(pause * 2, 10.0)


def _finish_record(launch: Launch, failure: Failure | None) -> FinishRecord:
    """What the end of ``launch``'s run writes to the job's state row: succeeded when there is
    no ``failure``; the next run after its claim's start, on the schedule, or after the retry
    wait of one more failure in a row (its job's ``error_retry_time``, ``error_backoff`` and
    ``error_retry_max``); stopped when a signal stopped it (:data:`STOPPING`)."""
    config = launch.config
    delay = retry_delay(
        launch.before.error_count + 1,
        float(config["error_retry_time"]),
        float(config["error_backoff"]),
        float(config["error_retry_max"]),
    )
    return FinishRecord(
        started=launch.claim.started,
        succeeded=failure is None,
        error=failure.error if failure is not None else {},
        next_run=next_run_after(launch.claim.started, launch.job.schedule, failure is None, delay),
        kind=launch.kind,
        stopped=failure is not None and failure.kind in STOPPING,
    )
