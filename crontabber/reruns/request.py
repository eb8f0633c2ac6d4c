"""What ``--rerun NAME`` asks (:class:`RerunRequest`) and the plan it gets
(:func:`plan_rerun`, a :class:`RerunPlan`): the options checked, the intervals chosen (of
``--date``/``--to``, or of the rerun ``--resume-run`` continues), each job's part in the order
it runs (the job, then with ``--downstream`` its dependants) and the warnings to give first.
``--dry-run`` prints this plan (:func:`crontabber.reruns.execute.plan_lines`) and the run
executes the same object (:func:`crontabber.reruns.execute.execute`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from ..errors import ConfigurationError, MarkerIsLive, RunNotFound
from ..formats import one_line
from ..leases import holder_gone
from ..scheduling import dependency_block, parse_day, rerun_dates
from .plan import (
    IntervalRecord,
    RerunRecord,
    Stage,
    dependants,
    downstream_steps,
    intervals_text,
    parse_only,
    plan_steps,
    same_days,
    to_run,
)
from .store import RerunStore

if TYPE_CHECKING:
    from ..config.catalog import Job
    from ..config.settings import Settings
    from ..store import StateStore


@dataclass(frozen=True)
class RerunRequest:
    """The options of ``--rerun NAME`` as the command line gave them: ``job`` the job
    ``name`` means (as typed: the dry run's hints repeat it), ``date``/``to`` the days
    (``YYYY-MM-DD`` text, unparsed), ``only`` (``failed``, ``missing`` or both), the order, the
    intervals at once (None: not given), ``--downstream``, ``--resume-run RUN`` (None: not
    given), ``--force`` and ``--reason`` (past a pause; recorded in the audit trail)."""

    job: Job
    name: str
    date: str = ""
    to: str = ""
    only: str = ""
    newest_first: bool = False
    parallel: int | None = None
    downstream: bool = False
    resume_run: int | None = None
    force: bool = False
    reason: str | None = None


@dataclass(frozen=True)
class RerunPlan:
    """A rerun as it will run: ``stages``, each job's part in the order they run (the job
    named first), ``resumed`` the rerun ``--resume-run`` continues or joins (None: a new one),
    ``warnings`` the lines to give before anything (a parent that would block a tick, newer
    reruns over the same days). What ``--dry-run`` prints and the run executes."""

    request: RerunRequest
    stages: tuple[Stage, ...]
    resumed: RerunRecord | None = None
    warnings: tuple[str, ...] = ()

    @property
    def dates(self) -> list[dt.datetime]:
        """The intervals the job named reruns, in the order it runs them."""
        return self.stages[0].dates

    def nothing_to_run(self) -> str | None:
        """Why nothing would run (every interval of every part skipped), else None."""
        if any(stage.dates for stage in self.stages):
            return None
        return (
            f"{self.request.job.app_name}: nothing to rerun: each of the "
            f"{len(self.stages[0].steps)} interval(s) is skipped (--dry-run says why)"
        )

    def audited(self) -> dict[str, object]:
        """What the audit trail records of the rerun's options besides its dates."""
        request = self.request
        detail: dict[str, object] = {}
        if request.force:
            detail["force"] = True
        if request.only:
            detail["only"] = request.only
        if request.newest_first:
            detail["newest_first"] = True
        if request.parallel:
            detail["parallel"] = request.parallel
        if len(self.stages) > 1:
            detail["downstream"] = [s.app_name for s in self.stages[1:] if s.not_rerun is None]
        if self.resumed is not None:
            detail["resumed_from"] = self.resumed.run_id
        return detail


def plan_rerun(
    store: StateStore,
    jobs: Sequence[Job],
    settings: Settings,
    request: RerunRequest,
    now: dt.datetime,
) -> RerunPlan:
    """The plan of ``request`` over what the ledger of ``store`` knows at ``now`` (the
    database's clock): the same request and ``now`` over the same ledger give an equal plan.
    Writes nothing.

    Raises:
        ConfigurationError: the job is not a backfill job; an option it does not take
            (``--parallel`` of a job without ``parallel_reruns``, options ``--resume-run``
            leaves out, a bad ``--date``, ``--to`` or ``--only``); no interval at all; a
            resumed rerun without a plan.
        RunNotFound: ``--resume-run`` names no rerun of the job.
        MarkerIsLive: ``--resume-run`` names a rerun one of whose runs still runs, one
            interval at a time (a ``--parallel`` rerun is joined instead).
    """
    job = request.job
    if not job.is_backfill:
        raise ConfigurationError(
            "--rerun",
            f"{job.app_name} is not a backfill job (it has no days to redo); "
            f"--job {job.app_name} --force runs it once now",
        )
    _check_options(request)
    ledger = _Ledger(store, settings.lease_seconds, now)
    resumed = _resumed(ledger, request) if request.resume_run is not None else None
    stages = _stages(ledger, jobs, request, resumed)
    warnings = _blocked(store, job, now)
    if resumed is not None:
        warnings += _newer(ledger, job, resumed)
    return RerunPlan(request, tuple(stages), resumed, tuple(warnings))


def gone_here(holder: str) -> bool:
    """Whether ``holder`` was a process of this host that is gone (it died holding the rerun)."""
    from ..identity import pid_alive, this_host

    return holder_gone(holder, this_host(), pid_alive)


def _check_options(request: RerunRequest) -> None:
    """``--parallel N``: N at least 1; above 1 only for a job that declares ``parallel_reruns``;
    ``--parallel``, ``--downstream``, ``--only`` and ``--newest-first`` not with
    ``--resume-run`` (it takes the rerun's own plan and options).

    Raises:
        ConfigurationError: one line naming the job and the option.
    """
    if request.resume_run is not None:
        given = {
            "--parallel": request.parallel is not None,
            "--downstream": request.downstream,
            "--only": bool(request.only),
            "--newest-first": request.newest_first,
        }
        for option, present in given.items():
            if present:
                raise ConfigurationError(
                    option,
                    "--resume-run takes the plan and options of the rerun it continues or joins; "
                    f"leave out {option}",
                )
    if request.parallel is None:
        return
    if request.parallel < 1:
        raise ConfigurationError(
            "--parallel",
            f"takes a number of intervals at once, 1 or more (not {request.parallel})",
        )
    if request.parallel > 1 and not request.job.parallel_reruns:
        raise ConfigurationError(
            "--parallel",
            f"{request.job.app_name} does not declare parallel_reruns = True (its intervals may "
            "depend on each other): it reruns one interval at a time; leave out --parallel",
        )


class _Ledger:
    """What a plan reads of the ledger, over one store at one ``now`` (the database's clock)."""

    def __init__(self, store: StateStore, lease: float, now: dt.datetime) -> None:
        self.store, self.reruns, self.lease, self.now = store, RerunStore(store), lease, now

    def records(
        self, app_name: str, dates: Sequence[dt.datetime]
    ) -> dict[dt.datetime, IntervalRecord]:
        """What the ledger knows of each of the job's intervals ``dates``."""
        return self.reruns.interval_records(app_name, dates, self.lease)

    def intervals_of(self, job: Job) -> Callable[[dt.date], list[dt.datetime]]:
        """The job's intervals starting on a day (as ``--date DAY`` would rerun them)."""
        state = self.store.state(job.app_name)
        last_success = state.last_success if state else None

        def intervals(day: dt.date) -> list[dt.datetime]:
            return rerun_dates(job.schedule, last_success, day, day, self.now)

        return intervals


def _stages(
    ledger: _Ledger, jobs: Sequence[Job], request: RerunRequest, resumed: RerunRecord | None
) -> list[Stage]:
    """The rerun's parts in the order they run: the job's (the intervals of ``--date``/``--to``,
    or of the rerun it continues, in its order), then with ``--downstream`` (given, or
    recorded by the rerun it continues) its dependants' (:func:`_downstream`).

    Raises:
        ConfigurationError: a bad ``--date``, ``--to`` or ``--only``, or no interval at all.
    """
    job = request.job
    try:
        only = parse_only(request.only)
    except ValueError as exc:
        raise ConfigurationError("--only", str(exc)) from None
    dates = list(resumed.plan) if resumed is not None else _dates(ledger, request)
    steps = plan_steps(
        dates, ledger.records(job.app_name, dates), only, request.newest_first, resumed
    )
    parallel = resumed.parallel if resumed is not None else (request.parallel or 1)
    first = Stage(job.app_name, tuple(steps), parallel, resumed)
    downstream = resumed.downstream if resumed is not None else request.downstream
    return [first, *_downstream(ledger, jobs, first, dates, only)] if downstream else [first]


def _downstream(
    ledger: _Ledger,
    jobs: Sequence[Job],
    first: Stage,
    dates: list[dt.datetime],
    only: frozenset[str],
) -> list[Stage]:
    """Each dependant's part of a ``--downstream`` rerun of ``first`` (``dates``: the
    intervals it was asked for), parents before children: its intervals of the days of the
    job's, or the plan of its rerun that the resumed rerun started; left out when it is not
    a backfill job."""
    resumed = first.record
    days = list(resumed.plan) if resumed is not None else to_run(first.steps)
    # with --only, a dependant's own failed or missing days of the range count too (its
    # parent may have done those days long ago while its own part never ran)
    judged = only and resumed is None
    graph = {j.app_name: j.depends_on for j in jobs}
    by_name = {j.app_name: j for j in jobs}
    stages = []
    for name in dependants(graph, first.app_name):
        child = by_name[name]
        if not child.is_backfill:
            stages.append(
                Stage(name, not_rerun=f"not a backfill job (--job {name} --force runs it once)")
            )
            continue
        found = (
            ledger.reruns.downstream_record(resumed.run_id, name, ledger.lease) if resumed else None
        )
        intervals = ledger.intervals_of(child)
        source = dates if judged else days
        planned = list(found.plan) if found is not None else same_days(source, intervals)
        records = ledger.records(name, planned)
        # a resumed rerun's dependants keep its --parallel (its first run recorded it)
        parallel = first.parallel if child.parallel_reruns else 1
        cap = found.parallel if found is not None else parallel
        steps = (
            downstream_steps(planned, records, only, same_days(days, intervals))
            if judged and found is None
            else plan_steps(planned, records, done_by=found)
        )
        stages.append(Stage(name, tuple(steps), cap, found))
    return stages


def _dates(ledger: _Ledger, request: RerunRequest) -> list[dt.datetime]:
    """The job's intervals that start on the days of ``--date``/``--to`` before ``now``.

    Raises:
        ConfigurationError: no ``--date``, a bad day, or no interval in the range.
    """
    job = request.job
    if not request.date:
        raise ConfigurationError(
            "--rerun", "needs --date YYYY-MM-DD [--to YYYY-MM-DD] (or --resume-run RUN)"
        )
    try:
        first = parse_day(request.date)
        last = parse_day(request.to) if request.to else first
        state = ledger.store.state(job.app_name)
        last_success = state.last_success if state else None
        dates = rerun_dates(job.schedule, last_success, first, last, ledger.now)
    except ValueError as exc:
        raise ConfigurationError("--date/--to", str(exc)) from None
    if not dates:
        raise ConfigurationError(
            "--date/--to",
            f"no interval of {job.app_name} starts between {first} and {last} before now",
        )
    return dates


def _resumed(ledger: _Ledger, request: RerunRequest) -> RerunRecord:
    """The rerun ``--resume-run RUN`` continues or joins: one of the job's reruns (RUN may be
    any run of it) that did not finish. Its runs still recorded as running that are dead
    (lease expired, or a process of this host that is gone) are left to the executor to
    record abandoned.

    Raises:
        ConfigurationError: ``--date``/``--to`` given too, or the run has no plan.
        RunNotFound: no such rerun of the job.
        MarkerIsLive: a run of it is still running (its lease is live) and it runs one
            interval at a time: exit 3 (a ``--parallel`` rerun is joined instead).
    """
    job, run_id = request.job, request.resume_run
    assert run_id is not None
    if request.date or request.to:
        raise ConfigurationError(
            "--resume-run", "takes the intervals of the run it continues; leave out --date and --to"
        )
    found = ledger.reruns.rerun_record(run_id, ledger.lease)
    if found is None or found.app_name != job.app_name or found.kind != "rerun":
        raise RunNotFound(job.app_name, run_id)
    if not found.plan:
        raise ConfigurationError(
            "--resume-run",
            f"run {found.run_id} of {job.app_name} has no recorded plan (a rerun of an older "
            "release): rerun its dates",
        )
    live = found.live(gone_here)
    if live and found.parallel <= 1:
        raise MarkerIsLive(
            job.app_name, f"resume run {found.run_id}", f"{live[0].holder} (its lease is live)"
        )
    return found


def _blocked(store: StateStore, job: Job, now: dt.datetime) -> list[str]:
    """One warning when a tick would not run ``job`` now because of its parents (one
    failing, say): a rerun goes on, but may work from what the parent did not produce."""
    if not job.depends_on:
        return []
    why = dependency_block(job.depends_on, store.states(), now)
    if why is None:
        return []
    return [
        f"{job.app_name}: warning: {one_line(why)} (a tick would skip {job.app_name} "
        "now); the rerun goes on, but its data may be incomplete"
    ]


def _newer(ledger: _Ledger, job: Job, resumed: RerunRecord) -> list[str]:
    """One warning per newer rerun of ``job`` whose runs claimed intervals of the plan of
    ``resumed`` (the rerun ``--resume-run`` continues): two reruns then cover the same days at
    once (each interval still runs once at a time: its claim), and the newer one is likely the
    one meant."""
    records = ledger.records(job.app_name, list(resumed.plan))
    claimed: dict[int, list[dt.datetime]] = {}
    for record in records.values():
        if record.kind == "rerun" and record.run_id is not None:
            claimed.setdefault(record.run_id, []).append(record.starts)
    newer: dict[int, list[dt.datetime]] = {}
    for run_id in sorted(r for r in claimed if r > resumed.run_id):
        group = ledger.reruns.rerun_record(run_id, ledger.lease)
        if group is not None and group.run_id > resumed.run_id:
            newer.setdefault(group.run_id, []).extend(claimed[run_id])
    return [_newer_line(job, resumed, root, dates) for root, dates in newer.items()]


def _newer_line(job: Job, resumed: RerunRecord, root: int, dates: Sequence[dt.datetime]) -> str:
    return (
        f"{job.app_name}: warning: a newer rerun, run {root}, covers "
        f"{intervals_text(sorted(dates))} of run {resumed.run_id}'s plan too: both would work on "
        f"the same days (each interval once at a time); --rerun {job.app_name} --resume-run "
        f"{root} joins the newer one"
    )
