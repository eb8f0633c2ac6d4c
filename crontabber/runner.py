"""Run due jobs: the due and dependency checks, the lock, the job, the
bookkeeping. All state goes through :class:`~crontabber.store.StateStore` (a rerun's
through :class:`~crontabber.reruns.store.RerunStore`, over its connection);
"now" is always the database's clock.

A pass (:meth:`Runner.run_all`) reads every job's state once, at its start; each run's end
brings back its own row, so a run costs the same whatever the number of jobs.
The claim is one transaction. A pass claims the first of its next due jobs (up to
:data:`CLAIM_WINDOW`, in its order) whose row is still due and that no other transaction
holds, passing over the rest in the same statement (``FOR UPDATE SKIP LOCKED``:
``StateStore.claim_next``), so its claims do not grow with the number of hosts; an
operator's ``--job NAME [--force]`` locks its one row with ``FOR UPDATE NOWAIT``
(``StateStore.claim``; contention: :class:`JobLocked`, exit 2). Either way the row's
``ongoing`` marker judged by :func:`crontabber.leases.marker_status` (live:
:class:`JobOngoing`, exit 3; expired, dead or stale: taken over, and logged),
then set with a new run id and a first heartbeat. The job runs in a child
process (:mod:`crontabber.supervisor`) while this process renews the lease.
Every state write of the run is conditional on its run id: a run that lost
its lease is fenced off (:class:`LeaseLost`, exit 4) and changes nothing.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import time

from .config.catalog import Job, run_order
from .config.settings import Settings
from .errors import (
    HostDrained,
    JobLockError,
    JobOngoing,
    Terminated,
)
from .formats import pause_end
from .frozen import Frozen
from .identity import pid_alive as pid_alive
from .identity import this_host
from .leases import LeaseRules, Marker, describe_marker, holder_gone, marker_status
from .placement import may_claim, placement_text
from .results import JobResult as JobResult
from .results import Status as Status
from .results import first_fenced as first_fenced
from .scheduling import dependency_block, is_due, pause_active
from .sidebyside import may_start
from .state import Claim, FleetHost, JobState, RunKind, Tick
from .store import StateStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, TypeAlias, TypeVar

    from .launch import Launch, Launcher, Rerun
    from .reruns.store import RerunStore

    T = TypeVar("T")

logger = logging.getLogger(__name__)

#: How many of a pass's next due jobs one claim considers: it takes the first no other runner
#: has taken (those others took meanwhile are passed over in the same statement). Larger than
#: the hosts racing over one due set usually are; a window all taken costs one more claim.
CLAIM_WINDOW = 16

#: A due job of the pass's read that another runner ran since.
TAKEN_ELSEWHERE = "another runner just ran it"


def lease_rules(settings: Settings, host: str | None = None) -> LeaseRules:
    """The lease rules of ``settings`` as ``host`` (this host) applies them: what a
    :class:`Runner` judges ``ongoing`` markers by, and what the inspection commands,
    ``--nagios``, ``--explain``, the alerts and the dashboard use without building one."""
    return LeaseRules(settings.lease_seconds, settings.max_ongoing_age_hours, host or this_host())


def markers_from_here(rules: LeaseRules) -> Callable[[JobState | None, dt.datetime], Marker]:
    """What a job's ongoing marker means from this host under ``rules``
    (:func:`crontabber.leases.marker_status`; this host's processes seen by :func:`pid_alive`)."""

    def marker(state: JobState | None, now: dt.datetime) -> Marker:
        return marker_status(state, now, rules, pid_alive)

    return marker


def gone_from(host: str) -> Callable[[str], bool]:
    """Whether a holder (``host:pid``) was a process of ``host`` (this host) that is gone
    (:func:`crontabber.leases.holder_gone`): what it holds is taken over at once."""

    def gone(holder: str) -> bool:
        return holder_gone(holder, host, pid_alive)

    return gone


NOT_DUE = "not due yet"


Reporter: TypeAlias = "Callable[[BaseException, Job], object]"


def _no_report(exc: BaseException, job: Job) -> None:
    return None


class Reporters(Frozen):
    """What a runner tells Sentry (:class:`crontabber.sentry.SentryReporter`, one reporter for
    both when ``sentry.crons`` is on): a job's errors (``errors``) and each run's start and end
    to Sentry Crons (``crons``); None: not told."""

    errors: Reporter | None = None
    crons: Any = None


def _run_loop() -> Any:
    """A new supervisor loop (imported when a job runs: never on an idle tick)."""
    from .runloop import RunLoop

    return RunLoop()


class Flight:
    """The runs of a runner in flight across its passes (a tick that outlives a pass, a
    server), and the supervisor loop that serves them (None until the first run: an idle
    tick forks nothing)."""

    def __init__(self) -> None:
        self.loop: Any = None
        self.launches: list[Launch] = []

    @property
    def interrupt(self) -> BaseException | None:
        """The SIGINT/SIGTERM that stopped the runs (None: none)."""
        return self.loop.interrupt if self.loop is not None else None


def _passed_over(name: str, why: JobLockError | None) -> JobResult:
    """The result of a due job a pass's claim passed over (``why``: see
    :class:`crontabber.store.NextClaim`)."""
    if why is None:
        return JobResult(name, Status.SKIPPED, TAKEN_ELSEWHERE)
    status = Status.ONGOING if isinstance(why, JobOngoing) else Status.LOCKED
    return JobResult(name, status, str(why), why)


def _noted(result: JobResult) -> JobResult:
    if result.error is not None and result.status is not Status.FENCED:  # fenced: logged already
        # another runner has it: a fleet's normal case, no warning
        logger.info("%s", result.error, extra={"job": result.app_name})
    return result


class Runner:
    """Runs configured jobs against one state store."""

    def __init__(
        self,
        settings: Settings,
        jobs: list[Job],
        store: StateStore,
        reporters: Reporters | None = None,
        host: str | None = None,
        tick: Tick | None = None,
        on_takeover: Callable[[Job, JobState, int], None] | None = None,
    ) -> None:
        """``reporters``: what it tells Sentry (None: nothing). ``tick``: record this
        invocation in ``crontabber_host`` with its first read of the state (a cron tick does;
        operator commands do not). ``on_takeover(job, before, run_id)``: called when a claim
        took a job over from a dead or expired run (the alerts' takeover event)."""
        self.settings = settings
        self.jobs = jobs
        self.store = store
        reporters = reporters or Reporters()
        self.report, self.crons = reporters.errors or _no_report, reporters.crons
        self.host = host or this_host()
        self.pid = os.getpid()
        self.rules = lease_rules(settings, self.host)
        self._snapshot: tuple[dict[str, JobState], dt.datetime] | None = None
        # A job was attempted since the snapshot was read: others' rows may have changed too.
        self._stale = False
        self._tick = tick
        #: The fleet as the tick's first read saw it (empty: not a tick); ``drained``: this
        #: host was drained then (the claim checks again under the row lock).
        self.fleet: tuple[FleetHost, ...] = ()
        self.drained = False
        self.on_takeover = on_takeover
        # recorded with each run it claims: which bucket a forced run really used
        self.options = settings.sources.given

    @functools.cached_property
    def launcher(self) -> Launcher:
        """What launches this runner's claimed runs and records their ends, built when the
        first job runs (an idle tick never imports :mod:`crontabber.launch`)."""
        from .launch import Launcher

        return Launcher(
            self.settings,
            self.store,
            lambda: self.reruns,
            self.report,
            self.crons,
            gone_from(self.host),
            self._remember,
        )

    @functools.cached_property
    def reruns(self) -> RerunStore:
        """The rerun lane's queries over this runner's store, built on first use (a cron tick
        never imports :mod:`crontabber.reruns.store`)."""
        from .reruns.store import RerunStore

        return RerunStore(self.store)

    def _states_and_now(self) -> tuple[dict[str, JobState], dt.datetime]:
        """The state rows and the database time, read once per pass: an idle tick costs
        two queries, not two per job, and a busy one reads every job once, not once per
        run (each run's end brings its own row and the clock back: :meth:`_remember`).
        A stale snapshot is harmless: the claim re-checks under the row lock."""
        if self._snapshot is None and self._tick is not None:
            # the same two queries, plus the record and the fleet (this host's drain)
            states, now, self.fleet = self.store.tick(self._tick)
            self._snapshot = (states, now)
            self.drained = any(h.drained for h in self.fleet if h.host == self.host)
            if self.drained:
                logger.info("%s", HostDrained(self.host))
            self._tick = None
        if self._snapshot is None:
            self._snapshot = (self.store.states(), self.store.now())
        return self._snapshot

    def snapshot(self) -> tuple[dict[str, JobState], dt.datetime]:
        """The state rows and the database time: the tick's first read while no job ran,
        read again (once) after one did: what the alerts judge every job by."""
        if self._stale:
            self._snapshot, self._stale = None, False
        return self._states_and_now()

    def _remember(self, state: JobState | None, now: dt.datetime | None) -> None:
        """A run's end as the pass goes on with it: the job's row as the end left it and
        the database's clock then (its dependants are judged by it; jobs due since then
        are due)."""
        if self._snapshot is None or state is None or now is None:
            return
        states, before = self._snapshot
        states[state.app_name] = state
        self._snapshot = (states, max(before, now))

    def run_all(self) -> list[JobResult]:
        """Attempt every due job in dependency order, up to ``max_parallel_jobs`` at once
        (:mod:`crontabber.sidebyside` says which may start; one supervisor loop,
        :class:`crontabber.runloop.RunLoop`, serves every run); each job's result, in the
        order they were known. While runs are in flight the pass is renewed every
        ``tick_seconds`` (:meth:`run_pass`): the state is read again, the tick recorded again
        (the host stays live) and the jobs that fell due meanwhile start beside the runs in
        flight, so a long run never holds a 5-minute job back, also where ticks never overlap
        (a oneshot systemd timer); the tick ends when nothing is in flight.

        A job that is locked elsewhere is reported and the others still run
        (crontabber stopped the whole tick at the first lock). SIGINT/SIGTERM stops every
        run in flight; each is recorded as stopped, then the signal is raised again.
        """
        flight = Flight()
        record = self._tick
        results = self.run_pass(flight)
        while flight.launches and flight.interrupt is None:
            self.renew(record)
            results += self.run_pass(flight)
        if flight.interrupt is not None:
            raise flight.interrupt
        return results

    def renew(self, record: Tick | None) -> None:
        """A new pass: the state is read again at its first attempt, recording the tick
        ``record`` again (None: not a tick) with it."""
        self._snapshot, self._stale, self._tick = None, False, record

    def run_pass(self, flight: Flight, stop: Callable[[], bool] | None = None) -> list[JobResult]:
        """One pass over the jobs: start each due job not in ``flight`` as the rule lets it
        (:mod:`crontabber.sidebyside`), and land the runs of ``flight`` as they end (starting
        more), until ``tick_seconds`` have passed since the pass began or nothing is in
        flight and nothing may start; the runs still in flight stay in ``flight`` for the next
        pass. ``stop()``: true once a server is asked to stop: nothing new starts (the pass
        then wakes every second to look). A SIGINT/SIGTERM lands every run in flight (each
        recorded stopped) and is kept in ``flight.interrupt``."""
        until = time.monotonic() + self.settings.tick_seconds
        results: list[JobResult] = []
        self._states_and_now()  # the tick is recorded even with no job configured
        busy = {launch.job.app_name for launch in flight.launches}
        waiting = [job for job in run_order(self.jobs) if job.app_name not in busy]
        try:
            while True:
                stopping = flight.interrupt is not None or (stop is not None and stop())
                if not stopping and waiting:
                    done, launch = self._start_next(waiting, flight.launches)
                    results += [_noted(result) for result in done]
                    if launch is not None:
                        flight.loop = flight.loop or _run_loop()
                        self.launcher.start(flight.loop, launch)
                        flight.launches.append(launch)
                        continue
                    if done:  # candidates refused or taken elsewhere: the next ones may start
                        continue
                if not flight.launches or (time.monotonic() >= until and flight.interrupt is None):
                    break
                wake = None if flight.interrupt is not None else until
                if stop is not None and wake is not None:
                    wake = min(wake, time.monotonic() + 1.0)
                results += self.land(flight, wake)
        except BaseException as exc:  # a signal (or a failure) outside the loop's wait
            if flight.loop is not None and flight.launches:
                if isinstance(exc, (KeyboardInterrupt, Terminated)):
                    flight.loop.stop(exc)
                while flight.launches:  # every run in flight is recorded before it goes on
                    results += self.land(flight, None)
            raise
        return results

    def _start_next(
        self, waiting: list[Job], flying: list[Launch]
    ) -> tuple[list[JobResult], Launch | None]:
        """The pass's next claim: the jobs of ``waiting`` that may start now beside
        ``flying`` (:func:`crontabber.sidebyside.may_start`) are judged by the pass's read
        (pause, placement, due, parents), the first :data:`CLAIM_WINDOW` of them that may
        run are the claim's candidates, and the first of those no other runner has taken is
        claimed (:meth:`StateStore.claim_next`: one transaction, whatever the number of
        hosts). Every job judged leaves ``waiting``, with its result (refused, or passed
        over: another runner has it); the claimed run is returned ready to start (None:
        none was claimed; no result either: wait for a run to end)."""
        running = [launch.job.app_name for launch in flying]
        alone = any(launch.alone for launch in flying)
        results: list[JobResult] = []
        gone: list[Job] = []  # judged: they leave ``waiting``
        window: list[Job] = []
        for job in may_start(waiting, running, alone, self.settings.max_parallel_jobs):
            refused = self._refusal(job)
            if refused is not None:
                results.append(refused)
                gone.append(job)
            else:
                window.append(job)
                if len(window) == CLAIM_WINDOW:
                    break
        launch = None
        if window:
            outcome = self._claim_next(window)
            if isinstance(outcome, JobResult):  # the host was drained meanwhile: the others
                results.append(outcome)  # are refused as drained when judged next
                gone.append(window[0])
            else:
                claimed, passed = outcome
                for name, why in passed:
                    results.append(_passed_over(name, why))
                taken = {name for name, _ in passed}
                gone += [job for job in window if job.app_name in taken]
                if claimed is not None:
                    job, before, claim = claimed
                    gone.append(job)
                    launch = self.launcher.launch(job, before, claim, RunKind.SCHEDULED)
        for job in gone:
            waiting.remove(job)
        return results, launch

    def _claim_next(
        self, window: list[Job]
    ) -> JobResult | tuple[tuple[Job, JobState, Claim] | None, tuple[tuple[str, Any], ...]]:
        """Claim the first job of ``window`` no other runner has taken (see
        :meth:`_start_next`)."""
        states, _ = self._states_and_now()
        by_name = {job.app_name: job for job in window}

        def decide(state: JobState, now: dt.datetime) -> bool:
            return self._decider(by_name[state.app_name], False)(state, now)

        self._stale = True  # from here on the jobs' (or others') states may change
        try:
            taken = self.store.claim_next(
                [job.app_name for job in window],
                {job.app_name: job.depends_on for job in window},
                (self.host, self.pid),
                decide,
                new=[job.app_name for job in window if job.app_name not in states],
                options=self.options,
                lease_seconds=self.rules.lease_seconds,
            )
        except HostDrained as exc:  # drained since the tick began: claims nothing more
            self.drained = True
            logger.info("skipping %s: %s", window[0].app_name, exc)
            return JobResult(window[0].app_name, Status.SKIPPED, "this host is drained")
        if taken.claimed is None:
            return None, taken.passed
        before, claim = taken.claimed
        job = by_name[claim.app_name]
        self._running(job, before, claim)
        return (job, before, claim), taken.passed

    def _running(self, job: Job, before: JobState, claim: Claim) -> None:
        logger.info("running %s (run %s)", job.app_name, claim.run_id, extra={"job": job.app_name})
        if before.ongoing is not None and self.on_takeover is not None:
            self.on_takeover(job, before, claim.run_id)

    def land(self, flight: Flight, until: float | None) -> list[JobResult]:
        """Wait for runs to end (``until``: a monotonic time at which to return anyway) and
        record each; a job that raised KeyboardInterrupt itself stops the pass as a signal
        would (nothing new starts; the others finish)."""
        results = []
        assert flight.loop is not None
        for run, ending in flight.loop.wait(until):
            launch = next(launch for launch in flight.launches if launch.supervisor is run)
            flight.launches.remove(launch)
            results.append(_noted(self.launcher.land(launch, ending)))
            fenced = results[-1].status is Status.FENCED
            if ending.interrupt is not None and flight.loop.interrupt is None and not fenced:
                flight.loop.interrupt = ending.interrupt
        return results

    def run_job(self, job: Job, force: bool) -> JobResult:
        """Attempt one job (an operator's ``--job NAME``); ``force`` skips the due and
        dependency checks, not the lock: its row is taken with ``FOR UPDATE NOWAIT`` and a
        row held elsewhere is a :attr:`Status.LOCKED` result carrying :class:`JobLocked`."""
        claimed = self._claim_job(job, force)
        if isinstance(claimed, JobResult):
            return claimed
        before, claim, kind = claimed
        return self.run_claimed(job, before, claim, kind=kind)

    def _claim_job(self, job: Job, force: bool) -> JobResult | tuple[JobState, Claim, RunKind]:
        try:
            return self._attempt(job, force)
        except JobLockError as exc:
            status = Status.ONGOING if isinstance(exc, JobOngoing) else Status.LOCKED
            return JobResult(job.app_name, status, str(exc), exc)

    def _attempt(self, job: Job, force: bool) -> JobResult | tuple[JobState, Claim, RunKind]:
        """The job's checks and claim: its result when it does not run, else the claim."""
        if not force:
            refused = self._refusal(job)
            if refused is not None:
                return refused
        self._stale = True  # from here on the job's (or others') state may change
        kind = RunKind.FORCED if force else RunKind.SCHEDULED
        try:
            claimed = self.store.claim(
                job.app_name,
                job.depends_on,
                (self.host, self.pid),
                self._decider(job, force),
                kind,
                self.options,
                drainable=not force,
                lease_seconds=self.rules.lease_seconds,
            )
        except HostDrained as exc:  # drained since the tick began: claims nothing more
            self.drained = True
            logger.info("skipping %s: %s", job.app_name, exc, extra={"job": job.app_name})
            return JobResult(job.app_name, Status.SKIPPED, "this host is drained")
        if claimed is None:
            return JobResult(job.app_name, Status.SKIPPED, TAKEN_ELSEWHERE)
        before, claim = claimed
        self._running(job, before, claim)
        return before, claim, kind

    def _refusal(self, job: Job) -> JobResult | None:
        """Why the pass's read says ``job`` may not run now (paused, this host may not run
        it, not due, a parent blocks it), as its result; None: it may be claimed."""
        states, now = self._states_and_now()
        state = states.get(job.app_name)
        if pause_active(state, now):
            assert state is not None and state.paused_until is not None
            paused = (
                f"paused {pause_end(state.paused_until)} by "
                f"{state.paused_by or 'unknown'}: {state.paused_reason or 'no reason given'}"
            )
            logger.info("skipping %s: %s", job.app_name, paused, extra={"job": job.app_name})
            return JobResult(job.app_name, Status.PAUSED, paused)
        if self.drained or not may_claim(job.hosts, self.settings.host_tags):
            why = (
                "this host is drained"
                if self.drained
                else placement_text(job.hosts, self.settings.host_tags)
            )
            logger.debug("skipping %s: %s", job.app_name, why, extra={"job": job.app_name})
            return JobResult(job.app_name, Status.SKIPPED, why)
        reason = self._why_not(job, states, now)
        if reason:
            # "not due" is every tick's normal case; a blocked dependency is news.
            level = logging.DEBUG if reason == NOT_DUE else logging.INFO
            logger.log(level, "skipping %s: %s", job.app_name, reason, extra={"job": job.app_name})
            return JobResult(job.app_name, Status.SKIPPED, reason)
        return None

    def _why_not(self, job: Job, states: dict[str, JobState], now: dt.datetime) -> str | None:
        if not is_due(states.get(job.app_name), job.schedule, now):
            return NOT_DUE
        return dependency_block(job.depends_on, states, now)

    def marker(self, state: JobState | None, now: dt.datetime) -> Marker:
        """What the job's ongoing marker means from this host."""
        return marker_status(state, now, self.rules, pid_alive)

    def _decider(self, job: Job, force: bool) -> Callable[[JobState, dt.datetime], bool]:
        def decide(state: JobState, now: dt.datetime) -> bool:
            status = self.marker(state, now)
            if status is Marker.LIVE:
                assert state.ongoing is not None
                age = (now - state.heartbeat).total_seconds() if state.heartbeat else None
                raise JobOngoing(job.app_name, state.ongoing, state.ongoing_by, age)
            if status.takeable:
                logger.warning(
                    "%s: taking over from %s",
                    job.app_name,
                    describe_marker(state, status, now),
                    extra={"job": job.app_name},
                )
            # Another runner may have finished it between our check and the lock.
            return force or state.next_run is None or state.next_run < now

        return decide

    def run_claimed(
        self,
        job: Job,
        before: JobState,
        claim: Claim,
        kind: RunKind = RunKind.SCHEDULED,
        rerun: Rerun | None = None,
    ) -> JobResult:
        """Run one claimed job alone (``--job``, a rerun's worker:
        :meth:`crontabber.operator_actions.OperatorActions.rerun`) and record how it ended; a
        SIGINT/SIGTERM that stopped it is raised again once it is recorded. A rerun's run
        (``rerun``) is not a pass's: the pass's read of the state is dropped first."""
        if rerun is not None:
            self._snapshot = None
        launch = self.launcher.launch(job, before, claim, kind, rerun)
        loop = _run_loop()
        self.launcher.start(loop, launch)
        try:
            ((_, ending),) = loop.wait()
        except BaseException as exc:  # a bug: still release the job
            self.launcher.land(launch, self.launcher.failed(exc))
            raise
        result = self.launcher.land(launch, ending)
        if ending.interrupt is not None and result.status is not Status.FENCED:
            raise ending.interrupt
        return result
