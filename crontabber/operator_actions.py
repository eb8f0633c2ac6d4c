"""An operator's actions on the jobs of a :class:`~crontabber.runner.Runner`, beside its
schedule: ``--reset-job`` and ``--release`` change a job's state row under its row lock, each
refused while the job's run is live (:meth:`OperatorActions.refuse_live`, which
``--mark-success`` uses too); ``--rerun`` runs a backfill job's intervals in a lane of its own
(:meth:`OperatorActions.rerun`, what :func:`crontabber.reruns.execute.execute` drives).

Imported only by the commands that act (never on an idle tick).
"""

from __future__ import annotations

import datetime as dt
import logging

from .errors import MarkerIsLive
from .formats import minute_text
from .leases import Marker, describe_marker
from .runner import gone_from
from .state import JobState, RunKind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .config.catalog import Job
    from .records import AuditEntry
    from .reruns.store import RerunStore
    from .results import JobResult
    from .runner import Runner

logger = logging.getLogger("crontabber.runner")  # the runner's lines, as before the split


def _span_text(dates: list[dt.datetime]) -> str:
    if len(dates) <= 3:
        return ", ".join(minute_text(d) for d in dates)
    return f"{len(dates)} intervals, {minute_text(dates[0])} to {minute_text(dates[-1])}"


class OperatorActions:
    """An operator's actions through ``runner``: its store and lease rules judge and change a
    job's row; its rerun lane's store, its holder (host and pid), its options and
    :meth:`~crontabber.runner.Runner.run_claimed` run a rerun. Implements
    :class:`crontabber.reruns.execute.Rerunner`."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.jobs, self.settings, self.host = runner.jobs, runner.settings, runner.host
        #: Whether a holder (``host:pid``) was a process of this host that is gone
        #: (:func:`crontabber.runner.gone_from`): what it holds is taken over at once.
        self.gone_here: Callable[[str], bool] = gone_from(runner.host)

    @property
    def reruns(self) -> RerunStore:
        """The runner's rerun lane store (:attr:`crontabber.runner.Runner.reruns`)."""
        return self.runner.reruns

    def reset(self, app_name: str, audit: AuditEntry | None = None) -> JobState | None:
        """Delete the job's state row (its history in the log stays); the row
        as it was, or None when there was none.

        Raises:
            MarkerIsLive: the job is running and its lease is live.
            JobLocked: another transaction holds the row right now.
        """
        return self.runner.store.locked_change(
            app_name, "reset", self.refuse_live(app_name, "reset it"), audit
        )

    def release(self, app_name: str, audit: AuditEntry | None = None) -> str | None:
        """Clear a dead, expired or stale ``ongoing`` marker, keeping last run,
        last success and the backfill anchor; what was released, or None when
        there was no marker.

        Raises:
            MarkerIsLive: the marker's lease is live.
            JobLocked: another transaction holds the row right now.
        """
        released: list[str] = []
        refuse = self.refuse_live(app_name, "release it")

        def decide(state: JobState, now: dt.datetime) -> bool:
            refuse(state, now)
            if state.ongoing is None:
                return False
            released.append(describe_marker(state, self.runner.marker(state, now), now))
            return True

        self.runner.store.locked_change(app_name, "release", decide, audit)
        return released[0] if released else None

    def refuse_live(self, app_name: str, action: str) -> Callable[[JobState, dt.datetime], bool]:
        """A decide function for an operator's change under the row lock: raises
        :class:`MarkerIsLive` when the job's lease is live, else allows it."""

        def decide(state: JobState, now: dt.datetime) -> bool:
            status = self.runner.marker(state, now)
            if status is Marker.LIVE:
                raise MarkerIsLive(app_name, action, describe_marker(state, status, now))
            return True

        return decide

    def rerun(
        self,
        job: Job,
        dates: list[dt.datetime],
        resumed_from: int | None = None,
        parallel: int | None = None,
        downstream: bool = False,
        downstream_of: int | None = None,
    ) -> JobResult:
        """Run a backfill job for exactly ``dates``, in that order, whatever is due; with
        ``resumed_from``, work on that rerun instead (its plan: continue it after a kill, or
        join it as one more worker when it runs ``parallel`` intervals at once).

        In a lane of its own: the run is a ledger row, never the job's marker, so the job's
        scheduled runs go on meanwhile; each interval is claimed before it runs
        (``crontabber_interval``), waiting while another run holds it, so no interval runs
        twice at once. The job's row is left alone: ``last_success``, ``next_run`` and its
        health are the schedule's. ``downstream``: the rerun goes on to the job's dependants
        (recorded for a resume); ``downstream_of``: this is a dependant's part of that rerun
        (a second worker arriving joins the first's).
        """
        runner = self.runner
        claim, root, cap = self.reruns.start_rerun(
            job.app_name,
            (runner.host, runner.pid),
            dates,
            runner.options,
            resumed_from,
            parallel,
            downstream,
            downstream_of,
            lease_seconds=runner.rules.lease_seconds,
        )
        joined = f", working on rerun {root}" if root != claim.run_id else ""
        logger.info(
            "rerunning %s for %s (run %s%s%s)",
            job.app_name,
            _span_text(dates) if dates else "the intervals left of its plan",
            claim.run_id,
            joined,
            f", up to {cap} intervals at once" if cap > 1 else "",
            extra={"job": job.app_name},
        )
        before = runner.store.state(job.app_name) or JobState(job.app_name)
        from .launch import Rerun

        rerun = Rerun(root, cap, not job.parallel_reruns)
        return runner.run_claimed(job, before, claim, kind=RunKind.RERUN, rerun=rerun)
