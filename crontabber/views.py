"""What the inspection commands show, as data: each job's status, its runs,
its last failure. Pure functions of jobs, state rows, log rows and ``now``
(the database clock); :mod:`crontabber.render` renders them as text,
``--json`` prints their ``as_json()`` (the dashboard serves the same).

A job's **status** is one word, the first that applies:

========  =================================================================
broken    its ``jobs`` entry does not load (its module does not import, its
          class is gone or has no ``app_name``): ticks run the other jobs
running   its ``ongoing`` marker is live (a run holds the job)
orphaned  it has a marker whose holder is gone (lease expired, process dead,
          or a crontabber 0.18 marker past ``max_ongoing_age_hours``): the
          next tick on any host takes it over
paused    an operator paused it and the pause has not ended
failing   its last attempt failed (``error_count`` > 0)
late      its next interval is past its ``deadline`` (not done by its time + deadline)
waiting   it is due but a parent blocks it (never ran, failed, or is late)
overdue   it was due more than ``overdue_seconds`` ago and no tick ran it
due       it is due: the next tick runs it
new       it never ran and is not due yet (a time of day not yet reached)
ok        none of these: its last run succeeded and its next run is ahead
========  =================================================================
"""

from __future__ import annotations

import ast
import datetime as dt
import enum
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .config.catalog import BrokenEntry, Job
from .formats import one_line
from .leases import Marker
from .records import LogEntry, RunRecord
from .scheduling import dependency_block, is_due, lateness, pause_active
from .state import JobState, RunStatus

MarkerOf = Callable[[JobState], Marker]


class JobStatus(enum.Enum):
    """A job's status in one word (see the module docstring)."""

    BROKEN = "broken"
    RUNNING = "running"
    ORPHANED = "orphaned"
    PAUSED = "paused"
    NO_HOST = "no-host"
    FAILING = "failing"
    LATE = "late"
    WAITING = "waiting"
    OVERDUE = "overdue"
    DUE = "due"
    NEW = "new"
    OK = "ok"


class Outcome(enum.Enum):
    """How a run (or one of its log rows) ended."""

    OK = "ok"
    FAILED = "failed"
    TIMED_OUT = "timed_out"  # stopped by the runner past its timeout (the run ledger says)
    STOPPED = "stopped_by_signal"  # SIGTERM/SIGINT, or a signal killed the job's process
    FENCED_OFF = "fenced_off"  # it lost its lease; its outcome was not recorded in the state
    ABANDONED = "abandoned"  # its holder died; recorded by whoever took over, released, reset
    RUNNING = "running"  # the run holding the job now (its rows so far are its finished units)

    @classmethod
    def of_status(cls, status: str) -> "Outcome | None":
        """The outcome a run ledger status (``crontabber_run.status``) means; None for
        ``running`` (whether it still runs is the marker's to say)."""
        return _LEDGER_OUTCOMES.get(status)

    @property
    def text(self) -> str:
        return self.value.replace("_", " ")


_LEDGER_OUTCOMES = {
    RunStatus.SUCCEEDED.value: Outcome.OK,
    RunStatus.FAILED.value: Outcome.FAILED,
    RunStatus.TIMED_OUT.value: Outcome.TIMED_OUT,
    RunStatus.STOPPED.value: Outcome.STOPPED,
    RunStatus.FENCED_OFF.value: Outcome.FENCED_OFF,
    RunStatus.ABANDONED.value: Outcome.ABANDONED,
}


# ---------------------------------------------------------------------------- errors

_CLASS_REPR = re.compile(r"^<(?:class|type) '([^']*)'>$")


def type_name(raw: str | None) -> str:
    """The exception class from crontabber's ``repr(type(exc))`` spelling:
    ``<class 'psycopg2.errors.UndefinedTable'>`` -> ``psycopg2.errors.UndefinedTable``,
    Python 2's ``<type 'exceptions.ValueError'>`` -> ``ValueError``."""
    text = (raw or "").strip()
    match = _CLASS_REPR.match(text)
    name = match.group(1) if match else text
    return name.removeprefix("exceptions.").removeprefix("builtins.")


def value_from_repr(text: str, short_type: str) -> str:
    """The message inside an exception's ``repr`` as the log stores it
    (``NameError('Trouble!!')`` -> ``Trouble!!``); the repr itself when it
    is not one string argument."""
    prefix = f"{short_type}("
    if not (text.startswith(prefix) and text.endswith(")")):
        return text
    inner = text[len(prefix) : -1]
    try:
        value = ast.literal_eval(inner) if inner else ""
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    return value if isinstance(value, str) else inner


@dataclass(frozen=True)
class ErrorInfo:
    """An error as recorded: its class (dotted), its message and the frames
    of its traceback (crontabber stores ``format_tb``: frames only)."""

    type: str
    value: str
    traceback: str
    # the failure in one plain line, when the run ledger has it (``Elasticsearch at http://...:
    # connection refused``: crontabber.failures.describe); None: derived from type and value
    line: str | None = None

    @property
    def short_type(self) -> str:
        return self.type.rsplit(".", 1)[-1]

    @property
    def summary(self) -> str:
        """The one line every command shows: the ledger's plain line, else ``Type: first line
        of the value``."""
        if self.line:
            return one_line(self.line)
        first = (self.value.strip().splitlines() or [""])[0]
        return f"{self.short_type}: {first}" if first else self.short_type

    @classmethod
    def of_state(cls, last_error: Mapping[str, Any], line: str | None = None) -> "ErrorInfo | None":
        """From a state row's ``last_error`` (None when it is empty); ``line``: the run
        ledger's plain line of it (:meth:`crontabber.store.StateStore.last_errors`)."""
        if not last_error:
            return None
        return cls(
            type_name(str(last_error.get("type", ""))),
            str(last_error.get("value", "")),
            str(last_error.get("traceback", "")),
            line,
        )

    @classmethod
    def of_entry(cls, entry: LogEntry, line: str | None = None) -> "ErrorInfo | None":
        """From a log row (None for a success row); ``line``: its run's error in one plain
        line, from the run ledger."""
        if entry.exc_type is None:
            return None
        kind = type_name(entry.exc_type)
        value = value_from_repr(entry.exc_value or "", kind.rsplit(".", 1)[-1])
        return cls(kind, value, entry.exc_traceback or "", line)

    def as_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "value": self.value,
            "traceback": self.traceback,
            "summary": self.summary,
        }


def entry_outcome(entry: LogEntry) -> Outcome:
    """ok (a unit done), failed, fenced off (a ``LeaseLost`` row) or abandoned (a
    ``RunAbandoned`` row)."""
    if entry.exc_type is None:
        return Outcome.OK
    kind = type_name(entry.exc_type).rsplit(".", 1)[-1]
    if kind == "LeaseLost":
        return Outcome.FENCED_OFF
    if kind == "RunAbandoned":
        return Outcome.ABANDONED
    return Outcome.FAILED


# ---------------------------------------------------------------------------- jobs


@dataclass(frozen=True)
class OngoingView:
    """Who holds the job now: since when, which runner (``host:pid``), which
    run, its last heartbeat, and the verdict (live, expired, dead, stale)."""

    since: dt.datetime
    by: str | None
    run_id: int | None
    heartbeat: dt.datetime | None
    verdict: Marker

    def as_json(self) -> dict[str, Any]:
        return {
            "since": self.since,
            "by": self.by,
            "run_id": self.run_id,
            "heartbeat": self.heartbeat,
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class PauseView:
    """A pause in effect: until when, why, by whom (``user@host``)."""

    until: dt.datetime
    reason: str | None
    by: str | None

    def as_json(self) -> dict[str, Any]:
        return {"until": self.until, "reason": self.reason, "by": self.by}


@dataclass(frozen=True)
class DeadlineView:
    """A missed deadline: the interval not done and the time it was due done by."""

    interval: dt.datetime
    due: dt.datetime

    def as_json(self) -> dict[str, Any]:
        return {"interval": self.interval, "due": self.due}


@dataclass(frozen=True)
class JobView:
    """Everything ``--list-jobs`` shows about one configured job.

    ``waiting_for`` is why a parent blocks it (only when it is due);
    ``late`` is how long ago it was due (only when it is due);
    ``deadline_missed`` the interval past its deadline (see :mod:`crontabber.alerts.rules`).
    """

    name: str
    class_path: str
    schedule: str
    status: JobStatus
    last_run: dt.datetime | None
    last_success: dt.datetime | None
    next_run: dt.datetime | None
    error_count: int
    last_error: ErrorInfo | None
    ongoing: OngoingView | None
    paused: PauseView | None
    depends_on: tuple[str, ...]
    is_backfill: bool
    waiting_for: str | None = None
    late: dt.timedelta | None = None
    deadline_missed: DeadlineView | None = None
    marked: str | None = None  # the last success is an operator's mark: "marked successful by ..."
    no_host: str | None = None  # no live, undrained host may run it: why (crontabber.placement)
    time_zone: str = "UTC"  # the zone its cron expression or HH:MM reads
    next_run_local: str | None = None  # next_run on that zone's clocks, ISO 8601 with its offset

    def as_json(self) -> dict[str, Any]:
        """The ``--list-jobs --json`` object of the job (times ISO 8601 UTC via jsonout;
        ``next_run_local``: on the clocks of its ``time_zone``)."""
        return {
            "name": self.name,
            "class": self.class_path,
            "schedule": self.schedule,
            "time_zone": self.time_zone,
            "next_run_local": self.next_run_local,
            "status": self.status,
            "last_run": self.last_run,
            "last_success": self.last_success,
            "last_success_marked": self.marked,
            "next_run": self.next_run,
            "error_count": self.error_count,
            "last_error": self.last_error.as_json() if self.last_error else None,
            "ongoing": self.ongoing.as_json() if self.ongoing else None,
            "paused": self.paused.as_json() if self.paused else None,
            "waiting_for": self.waiting_for,
            "no_host": self.no_host,
            "late_seconds": self.late,
            "deadline_missed": self.deadline_missed.as_json() if self.deadline_missed else None,
            "depends_on": list(self.depends_on),
            "is_backfill": self.is_backfill,
        }


def job_view(
    job: Job,
    states: Mapping[str, JobState],
    now: dt.datetime,
    marker: MarkerOf,
    overdue_seconds: float,
    missed: DeadlineView | None = None,
    no_host: str | None = None,
    error_line: str | None = None,
) -> JobView:
    """The view of one configured job at ``now``.

    ``marker`` classifies an ``ongoing`` marker (the runner's rules, from this
    host); ``overdue_seconds`` is how late a due job may be before it is
    ``overdue`` rather than ``due`` (a tick every few minutes makes any job a
    little late); ``missed``: its interval past its deadline, if one is; ``no_host``: why no
    live, undrained host may run it (:func:`crontabber.placement.unplaced`), if none may;
    ``error_line``: its last failure in one plain line (the run ledger's), if it has one.
    """
    state = states.get(job.app_name)
    ongoing = _ongoing(state, marker)
    paused = _pause_view(state, now)
    due = is_due(state, job.schedule, now)
    waiting_for = dependency_block(job.depends_on, states, now) if due else None
    late = lateness(state, now) if due else None
    status = _status(state, ongoing, paused, due, waiting_for, late, overdue_seconds)
    return JobView(
        name=job.app_name,
        class_path=job.class_path,
        schedule=str(job.schedule),
        status=_placed_status(status, missed, no_host),
        last_run=state.last_run if state else None,
        last_success=state.last_success if state else None,
        next_run=state.next_run if state else None,
        error_count=state.error_count if state else 0,
        last_error=ErrorInfo.of_state(state.last_error, error_line) if state else None,
        ongoing=ongoing,
        paused=paused,
        depends_on=job.depends_on,
        is_backfill=job.is_backfill,
        waiting_for=waiting_for,
        late=late,
        deadline_missed=missed,
        marked=state.mark_text() if state is not None and state.success_marked else None,
        no_host=no_host,
        time_zone=job.schedule.zone,
        next_run_local=_local_text(state.next_run if state else None, job.schedule.zone),
    )


def _pause_view(state: JobState | None, now: dt.datetime) -> PauseView | None:
    """The pause of a job's ``state`` in force at ``now``; None when there is none."""
    if state is not None and state.paused_until is not None and pause_active(state, now):
        return PauseView(state.paused_until, state.paused_reason, state.paused_by)
    return None


def _placed_status(
    status: JobStatus, missed: DeadlineView | None, no_host: str | None
) -> JobStatus:
    """``status`` after the fleet and the deadline: ``NO_HOST`` when no host may run the job
    (whatever else, unless it is running, orphaned or paused: it runs nowhere until a host
    may), else ``LATE`` for a ``missed`` deadline over a status below it."""
    if no_host is not None and status not in (
        JobStatus.RUNNING,
        JobStatus.ORPHANED,
        JobStatus.PAUSED,
    ):
        return JobStatus.NO_HOST
    if missed is not None and status in _BELOW_LATE:
        return JobStatus.LATE
    return status


def _local_text(when: dt.datetime | None, zone: str) -> str | None:
    """``when`` on the clocks of ``zone``, ISO 8601 with its offset (None: None)."""
    if when is None:
        return None
    if zone == "UTC":
        return when.astimezone(dt.timezone.utc).isoformat()
    from .cron import zone_of

    return when.astimezone(zone_of(zone)).isoformat()


#: The statuses a missed deadline overrides (those after ``late`` in the module docstring).
_BELOW_LATE = (JobStatus.WAITING, JobStatus.OVERDUE, JobStatus.DUE, JobStatus.NEW, JobStatus.OK)


def broken_view(broken: BrokenEntry) -> JobView:
    """The row of a jobs entry that does not load: named by its class path, its error as
    the last error (``ConfigurationError``), nothing else known (no app name, no state)."""
    entry = broken.entry
    return JobView(
        name=broken.name,
        class_path=entry.class_path,
        schedule=entry.frequency + (f" @ {entry.time}" if entry.time else ""),
        status=JobStatus.BROKEN,
        last_run=None,
        last_success=None,
        next_run=None,
        error_count=0,
        last_error=ErrorInfo("ConfigurationError", broken.problem, ""),
        ongoing=None,
        paused=None,
        depends_on=(),
        is_backfill=False,
    )


def _ongoing(state: JobState | None, marker: MarkerOf) -> OngoingView | None:
    if state is None or state.ongoing is None:
        return None
    return OngoingView(
        state.ongoing, state.ongoing_by, state.run_id, state.heartbeat, marker(state)
    )


def _status(
    state: JobState | None,
    ongoing: OngoingView | None,
    paused: PauseView | None,
    due: bool,
    waiting_for: str | None,
    late: dt.timedelta | None,
    overdue_seconds: float,
) -> JobStatus:
    if ongoing is not None:
        return JobStatus.RUNNING if ongoing.verdict is Marker.LIVE else JobStatus.ORPHANED
    if paused is not None:
        return JobStatus.PAUSED
    if state is not None and state.error_count:
        return JobStatus.FAILING
    if due and waiting_for:
        return JobStatus.WAITING
    if late is not None and late.total_seconds() > overdue_seconds:
        return JobStatus.OVERDUE
    if due:
        return JobStatus.DUE
    if state is None or state.last_run is None:
        return JobStatus.NEW
    return JobStatus.OK


def job_views(
    jobs: Sequence[Job],
    states: Mapping[str, JobState],
    now: dt.datetime,
    marker: MarkerOf,
    overdue_seconds: float,
    missed: Mapping[str, DeadlineView] | None = None,
    no_host: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
) -> list[JobView]:
    """:func:`job_view` of each job, in the order given (config order); ``missed``: the
    jobs past a deadline, ``no_host``: those no live host may run (why), ``errors``: the
    failing jobs' last error in one plain line, by app name."""
    missed, no_host, errors = missed or {}, no_host or {}, errors or {}
    return [
        job_view(
            job,
            states,
            now,
            marker,
            overdue_seconds,
            missed.get(job.app_name),
            no_host.get(job.app_name),
            errors.get(job.app_name),
        )
        for job in jobs
    ]


def jobs_document(views: Sequence[JobView], now: dt.datetime) -> dict[str, Any]:
    """``--list-jobs --json``: ``{"now": ..., "jobs": [...]}`` (``now`` is the
    database clock the statuses were judged at)."""
    return {"now": now, "jobs": [view.as_json() for view in views]}


# ---------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunView:
    """One run of a job, from its log rows (``entries``, newest first) and its
    row in the run ledger (``record``; None for runs before migration 0012).

    A backfill run logs one success row per interval, then a failure row if
    an interval failed; other runs log one row. The run in progress (the one
    holding the job's marker) has ``outcome`` running and ``ongoing`` set,
    with its finished intervals as entries. The ledger's status, when it has
    one, decides the outcome (it alone knows a timeout from a failure).
    """

    run_id: int | None
    host: str | None
    pid: int | None
    started: dt.datetime
    ended: dt.datetime | None
    outcome: Outcome
    error: ErrorInfo | None
    entries: tuple[LogEntry, ...]
    ongoing: OngoingView | None = None
    record: RunRecord | None = None

    @property
    def kind(self) -> str | None:
        """scheduled, forced or rerun (None before the run ledger)."""
        return self.record.kind if self.record is not None else None

    @property
    def summary(self) -> str | None:
        """The job's one-line summary of the run (its last unit's), if it gave one."""
        if self.record is not None and self.record.summary:
            return self.record.summary
        return next((entry.summary for entry in self.entries if entry.summary), None)

    @property
    def breach(self) -> str | None:
        """The checks it breached, if any (the ledger's; ``--history`` shows ``ok, breach``)."""
        return self.record.breach if self.record is not None else None

    @property
    def outcome_text(self) -> str:
        """The outcome in words, ``ok, breach`` for a success that breached a check."""
        return (
            f"{self.outcome.text}, breach"
            if self.breach and self.outcome is Outcome.OK
            else self.outcome.text
        )

    @property
    def metrics(self) -> Mapping[str, float]:
        """The named numbers the job returned with its summary ({}: none, or before 0024)."""
        return self.record.metrics if self.record is not None else {}

    @property
    def intervals(self) -> list[dt.datetime]:
        """The intervals it completed (a backfill run's), oldest first."""
        return sorted(
            entry.success
            for entry in self.entries
            if entry.success is not None and not entry.failed
        )

    @property
    def by(self) -> str | None:
        """``host:pid``, or None when the log does not say (rows before 0005)."""
        if self.host is None:
            return None
        return f"{self.host}:{self.pid}" if self.pid is not None else self.host

    def duration(self, now: dt.datetime) -> dt.timedelta:
        """How long it ran (so far, for the run in progress; for an abandoned run, up to its
        last heartbeat, as its log row and ``--show-error`` say: when its holder died is not
        known, only that it ran at least this long)."""
        if self.outcome is Outcome.ABANDONED:
            row = next(
                (
                    entry
                    for entry in self.entries
                    if entry_outcome(entry) is Outcome.ABANDONED and entry.duration is not None
                ),
                None,
            )
            if row is not None and row.duration is not None:
                return row.duration
        return (self.ended or now) - self.started

    def as_json(self, now: dt.datetime) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "by": self.by,
            "host": self.host,
            "pid": self.pid,
            "started": self.started,
            "ended": self.ended,
            "duration": self.duration(now),
            "outcome": self.outcome,
            "error": self.error.as_json() if self.error else None,
            "heartbeat": (
                self.ongoing.heartbeat
                if self.ongoing
                else self.record.heartbeat
                if self.record
                else None
            ),
            "verdict": self.ongoing.verdict if self.ongoing else None,
            "kind": self.kind,
            "summary": self.summary,
            "metrics": dict(self.metrics),
            "breach": self.breach,
            "output_bytes": self.record.output_bytes if self.record else None,
            "entries": [_entry_json(entry) for entry in self.entries],
        }


def _entry_json(entry: LogEntry) -> dict[str, Any]:
    error = ErrorInfo.of_entry(entry)
    return {
        "id": entry.id,
        "logged": entry.log_time,
        "started": entry.started,
        "duration": entry.duration or dt.timedelta(0),
        "success": entry.success,
        "outcome": entry_outcome(entry),
        "error": error.summary if error else None,
        "summary": entry.summary,
    }


def group_runs(
    entries: Sequence[LogEntry],
    state: JobState | None,
    marker: MarkerOf,
    records: Mapping[int, RunRecord] | None = None,
) -> list[RunView]:
    """The runs that ``entries`` (newest first, as ``StateStore.log_runs``
    returns them) make up, newest first, each with its ledger row from ``records``
    (by run id); the run holding the job's marker (``state``) comes first, as
    running, even before it has logged a row."""
    records = records or {}
    groups: dict[int, list[LogEntry]] = {}
    for entry in entries:
        groups.setdefault(entry.run_id if entry.run_id is not None else -entry.id, []).append(entry)
    holding = _ongoing(state, marker)
    runs = [
        _run(rows, _lane_holding(records.get(key), marker) or holding, records.get(key))
        for key, rows in groups.items()
    ]
    # the runs the ledger has and the log does not (yet): a rerun's joiner killed before its
    # first interval ended, a run claimed that logged nothing
    held = holding.run_id if holding is not None else None
    for run_id in sorted((r for r in records if r not in groups and r != held), reverse=True):
        # by run id among the others (ids grow with time; a run without one is older)
        at = next(
            (n for n, run in enumerate(runs) if run.run_id is None or run.run_id < run_id),
            len(runs),
        )
        runs.insert(at, _ledger_run(records[run_id], marker))
    if holding is not None and not any(run.ongoing for run in runs):
        host, _, pid = (holding.by or "").rpartition(":")
        record = records.get(holding.run_id) if holding.run_id is not None else None
        runs.insert(
            0,
            RunView(
                holding.run_id,
                host or holding.by,
                int(pid) if pid.isdigit() else None,
                holding.since,
                None,
                Outcome.RUNNING,
                None,
                (),
                holding,
                record,
            ),
        )
    return runs


def lane_state(record: RunRecord) -> JobState:
    """A rerun's run (its own lane: never the job's marker) as a marker would hold it, so that
    the runner's rules judge it (live, expired, dead): its lease is its ledger row's heartbeat."""
    return JobState(
        record.app_name,
        ongoing=record.started,
        ongoing_by=record.by,
        run_id=record.run_id,
        heartbeat=record.heartbeat or record.started,
    )


def _lane_holding(record: RunRecord | None, marker: MarkerOf) -> OngoingView | None:
    """The holder view of a rerun's run the ledger says is running (None otherwise): live,
    or expired or dead until a tick or the run taking its interval over records it abandoned."""
    if record is None or record.kind != "rerun" or record.status != RunStatus.RUNNING.value:
        return None
    return _ongoing(lane_state(record), marker)


def _ledger_run(record: RunRecord, marker: MarkerOf) -> RunView:
    """A run known to the ledger only, a running rerun's with its holder's verdict."""
    holding = _lane_holding(record, marker)
    if holding is None:
        return record_run(record)
    return RunView(
        record.run_id,
        record.host,
        record.pid,
        record.started,
        None,
        Outcome.RUNNING,
        None,
        (),
        holding,
        record,
    )


def record_run(record: RunRecord) -> RunView:
    """A run known to the ledger only (claimed; nothing logged yet, or its rows pruned)."""
    outcome = Outcome.of_status(record.status) or Outcome.RUNNING
    return RunView(
        record.run_id,
        record.host,
        record.pid,
        record.started,
        record.ended,
        outcome,
        None,
        (),
        None,
        record,
    )


def _run(
    rows: list[LogEntry], holding: OngoingView | None, record: RunRecord | None = None
) -> RunView:
    last = rows[0]
    outcomes = {entry_outcome(row) for row in rows}
    failure = next((row for row in rows if row.failed), None)
    ongoing = None
    if holding is not None and last.run_id is not None and last.run_id == holding.run_id:
        ongoing = holding
    # fenced off before abandoned: a run taken over while frozen that came back and was
    # refused has both rows, and "fenced off" says more
    outcome = (
        Outcome.RUNNING
        if ongoing
        else Outcome.FENCED_OFF
        if Outcome.FENCED_OFF in outcomes
        else Outcome.ABANDONED
        if Outcome.ABANDONED in outcomes
        else Outcome.FAILED
        if Outcome.FAILED in outcomes
        else Outcome.OK
    )
    ledger = Outcome.of_status(record.status) if record is not None else None
    if ongoing is None and ledger is not None and outcome is not Outcome.FENCED_OFF:
        outcome = ledger  # a timeout or a signal is known to the ledger only
    started = min(row.started for row in rows)
    if record is not None:
        started = min(started, record.started)
    if ongoing is not None:
        started = min(started, ongoing.since)
    return RunView(
        last.run_id,
        last.host,
        last.pid,
        started,
        None if ongoing else last.log_time,
        outcome,
        ErrorInfo.of_entry(failure, record.error if record is not None else None)
        if failure
        else None,
        tuple(rows),
        ongoing,
        record,
    )


def history_document(
    app_name: str, runs: Sequence[RunView], now: dt.datetime, more: bool, is_backfill: bool
) -> dict[str, Any]:
    """``--history --json``: ``{"job", "now", "is_backfill", "more", "runs": [...]}``;
    ``more`` says whether older runs exist beyond the limit."""
    return {
        "job": app_name,
        "now": now,
        "is_backfill": is_backfill,
        "more": more,
        "runs": [run.as_json(now) for run in runs],
    }


# ---------------------------------------------------------------------------- failures


@dataclass(frozen=True)
class FailureView:
    """A failed attempt: the error and where and when it happened.

    ``source`` is ``log`` (a ``crontabber_log`` row) or ``state`` (the job's
    ``last_error``, when the log no longer has the row: pruned, or written by
    a runner that did not log it).
    """

    app_name: str
    error: ErrorInfo
    at: dt.datetime | None
    duration: dt.timedelta | None
    run_id: int | None
    host: str | None
    pid: int | None
    outcome: Outcome
    source: str

    @property
    def by(self) -> str | None:
        if self.host is None:
            return None
        return f"{self.host}:{self.pid}" if self.pid is not None else self.host

    @classmethod
    def of_entry(cls, entry: LogEntry) -> "FailureView":
        error = ErrorInfo.of_entry(entry)
        assert error is not None, "a failure row has exc_type"
        return cls(
            entry.app_name,
            error,
            entry.log_time,
            entry.duration,
            entry.run_id,
            entry.host,
            entry.pid,
            entry_outcome(entry),
            "log",
        )

    @classmethod
    def of_state(cls, state: JobState) -> "FailureView | None":
        error = ErrorInfo.of_state(state.last_error) if state.error_count else None
        if error is None:
            return None
        return cls(
            state.app_name,
            error,
            state.last_run,
            None,
            state.run_id,
            None,
            None,
            Outcome.FAILED,
            "state",
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "outcome": self.outcome,
            "at": self.at,
            "duration": self.duration,
            "by": self.by,
            "host": self.host,
            "pid": self.pid,
            "source": self.source,
            "error": self.error.as_json(),
        }


def last_failure(logged: LogEntry | None, state: JobState | None) -> FailureView | None:
    """The failure ``--show-error`` shows: the newest failure row of the log,
    or, when the log has none but the state row still records a failure
    (its log row pruned), the state's ``last_error``."""
    if logged is not None:
        return FailureView.of_entry(logged)
    return FailureView.of_state(state) if state is not None else None


def failure_document(app_name: str, failure: FailureView | None, message: str) -> dict[str, Any]:
    """``--show-error --json``: ``{"job", "failure": {...} | null, "message"}``;
    ``message`` is the one-line text summary (what the text output starts with)."""
    return {"job": app_name, "failure": failure.as_json() if failure else None, "message": message}
