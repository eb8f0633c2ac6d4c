"""Pure scheduling logic: parsing the jobs list, due checks, next runs,
backfill intervals and dependency order.

Nothing here touches the database or the clock: every function that needs
"now" takes it as an argument (the runner passes the database's clock), so
these rules are tested in milliseconds and hosts with drifting clocks agree.
The semantics are crontabber 0.18's, with its bugs fixed where noted
(``docs/crontabber-0.18.md`` lists them).
"""

from __future__ import annotations

import collections.abc
import datetime as dt
import graphlib
import re

from .errors import ConfigurationError
from .formats import minute_text
from .frozen import Frozen, setfield
from .state import JobState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping, Sequence

UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400}
DAY = 86400
# A job that runs less than once a year is not a cron job; the cap also keeps
# next-run arithmetic far from datetime's year 9999.
MAX_FREQUENCY_SECONDS = 366 * DAY

_FREQUENCY = re.compile(r"^\s*(\d+)\s*([mhd])\s*$")
_TIME = re.compile(r"^\s*(\d{1,2}):(\d{1,2})\s*$")


class TimeOfDay(Frozen):
    """A UTC time of day (``HH:MM``) at which a job runs."""

    __slots__ = ("hour", "minute")
    hour: int
    minute: int

    def __init__(self, hour: int, minute: int) -> None:
        setfield(self, "hour", hour)
        setfield(self, "minute", minute)

    def __str__(self) -> str:
        return f"{self.hour:02d}:{self.minute:02d}"


class Schedule(Frozen):
    """How often a job runs: its frequency and optional time of day, and how late it sees
    the clock.

    ``lag`` (the settle lag) and ``jitter`` (a fixed offset derived from the job's name,
    :func:`jitter_offset`) add up to :attr:`delay`: the job runs as if the time were ``now -
    delay``. A daily job at 06:00 with a delay of 7 minutes is due at 06:07; a backfill job's
    interval ``T`` runs once ``T + delay`` has passed (its data has settled). ``next_run`` is
    stored as the wall-clock time it is due (the delay included), so the due check, lateness
    and every view read it as they always did.
    """

    __slots__ = ("frequency", "seconds", "time", "lag", "jitter")
    frequency: str
    seconds: int
    time: TimeOfDay | None
    lag: dt.timedelta
    jitter: dt.timedelta

    def __init__(
        self,
        frequency: str,
        seconds: int,
        time: TimeOfDay | None,
        lag: dt.timedelta = dt.timedelta(0),
        jitter: dt.timedelta = dt.timedelta(0),
    ) -> None:
        setfield(self, "frequency", frequency)
        setfield(self, "seconds", seconds)
        setfield(self, "time", time)
        setfield(self, "lag", lag)
        setfield(self, "jitter", jitter)

    def __str__(self) -> str:
        return f"{self.frequency} @ {self.time}" if self.time else self.frequency

    @property
    def interval(self) -> dt.timedelta:
        return dt.timedelta(seconds=self.seconds)

    @property
    def delay(self) -> dt.timedelta:
        """How late the job sees the clock: its settle lag plus its jitter."""
        return self.lag + self.jitter

    def delayed(self, lag: dt.timedelta, spread: dt.timedelta, app_name: str) -> "Schedule":
        """This schedule with a settle ``lag`` and the jitter of ``app_name`` within ``spread``.

        Raises:
            ValueError: a negative value, or a delay of a whole interval or more (the job
                would be due again before its own delayed run).
        """
        if lag < dt.timedelta(0) or spread < dt.timedelta(0):
            raise ValueError("must not be negative")
        if not lag and not spread:
            return self  # most jobs: nothing to derive
        jitter = jitter_offset(app_name, spread)
        if lag + spread >= self.interval:
            raise ValueError(
                f"settle lag + jitter ({lag + spread}) must be shorter than the job's frequency ({self.frequency})"
            )
        return self.replace(lag=lag, jitter=jitter)


def with_delay(schedule: Schedule, config: Mapping[str, Any], app_name: str) -> Schedule:
    """``schedule`` with the settle lag and jitter of a job's resolved options (its
    ``self.config``: ``settle_lag``, ``jitter``): how the runner and the job's own process
    both see its clock.

    Raises:
        ValueError: a value that is not a duration, or a delay of a whole interval or more.
    """
    return schedule.delayed(
        parse_duration(config.get("settle_lag", 0)), parse_duration(config.get("jitter", 0)), app_name
    )


def jitter_offset(app_name: str, spread: dt.timedelta) -> dt.timedelta:
    """A job's fixed start offset within ``spread``, in whole seconds, derived from its name
    (SHA-256): the same on every host and every tick, so the jobs of a fleet spread over
    ``spread`` and each keeps its place (a delay drawn anew at each start, as systemd's
    ``RandomizedDelaySec``, can starve a job behind its neighbours)."""
    seconds = int(spread.total_seconds())
    if seconds <= 0:
        return dt.timedelta(0)
    import hashlib  # OpenSSL's: 3 ms of every tick otherwise, and most jobs have no jitter

    digest = hashlib.sha256(app_name.encode("utf-8")).digest()
    return dt.timedelta(seconds=int.from_bytes(digest[:8], "big") % seconds)


def parse_duration(text: str | int | float | dt.timedelta) -> dt.timedelta:
    """``0``, seconds (``600``) or a number and a unit (``10m``, ``6h``, ``1d``).

    Raises:
        ValueError: anything else, or a negative number.
    """
    if isinstance(text, dt.timedelta):
        return text
    raw = str(text).strip()
    match = _FREQUENCY.match(raw)
    if match:
        return dt.timedelta(seconds=int(match.group(1)) * UNIT_SECONDS[match.group(2)])
    try:
        seconds = float(raw or 0)
    except ValueError:
        raise ValueError(
            f"bad duration {raw!r}: expected seconds or a number and a unit m, h or d (e.g. 600, 10m, 6h)"
        ) from None
    if seconds < 0:
        raise ValueError(f"bad duration {raw!r}: must not be negative")
    return dt.timedelta(seconds=seconds)


class JobEntry(Frozen):
    """One line of the ``jobs`` list: ``module.Class|FREQ[|HH:MM]``."""

    __slots__ = ("class_path", "frequency", "time", "text")
    class_path: str
    frequency: str
    time: str | None
    text: str

    def __init__(self, class_path: str, frequency: str, time: str | None, text: str) -> None:
        setfield(self, "class_path", class_path)
        setfield(self, "frequency", frequency)
        setfield(self, "time", time)
        setfield(self, "text", text)

    @property
    def class_name(self) -> str:
        return self.class_path.rsplit(".", 1)[-1]


def parse_frequency(text: str) -> int:
    """Return the seconds of a frequency such as ``5m``, ``2h`` or ``1d``.

    Stricter than crontabber (which read ``1d2h`` as one day, crashed with
    an ``IndexError`` on ``5`` and accepted ``0m``): the whole text must be
    digits and a unit, from 1 minute to 366 days.

    Raises:
        ValueError: with a message that says what is accepted.
    """
    match = _FREQUENCY.match(text)
    if not match:
        raise ValueError(f"bad frequency {text!r}: expected a number and a unit m, h or d (e.g. 5m, 1d)")
    seconds = int(match.group(1)) * UNIT_SECONDS[match.group(2)]
    if seconds == 0:
        raise ValueError(f"bad frequency {text!r}: it must be at least 1m")
    if seconds > MAX_FREQUENCY_SECONDS:
        raise ValueError(f"bad frequency {text!r}: it must be at most 366d")
    return seconds


def parse_time(text: str) -> TimeOfDay:
    """Return the :class:`TimeOfDay` of ``HH:MM`` (0 <= HH <= 23, 0 <= MM <= 59).

    Raises:
        ValueError: when the text is not a valid time of day.
    """
    match = _TIME.match(text)
    if not match:
        raise ValueError(f"bad time {text!r}: expected HH:MM")
    hour, minute = int(match.group(1)), int(match.group(2))
    if hour > 23 or minute > 59:
        raise ValueError(f"bad time {text!r}: hour must be 0-23 and minute 0-59")
    return TimeOfDay(hour, minute)


def parse_schedule(frequency: str, time: str | None) -> Schedule:
    """Validate a frequency and optional time together.

    A time of day needs a frequency of at least one day (crontabber only
    checked this in ``--configtest``; we refuse it up front).

    Raises:
        ValueError: naming the bad part.
    """
    seconds = parse_frequency(frequency)
    time_of_day = parse_time(time) if time else None
    if time_of_day is not None and seconds < DAY:
        raise ValueError(f"a time of day ({time}) needs a frequency of at least 1d, not {frequency!r}")
    return Schedule(frequency.strip(), seconds, time_of_day)


def split_jobs_list(text: str) -> list[str]:
    """Split the ``jobs`` option on newlines, commas and semicolons.

    Blank pieces and pieces starting with ``#`` are dropped, as crontabber does.
    """
    pieces = (piece.strip() for piece in re.split(r"[\n,;]", text or ""))
    return [piece for piece in pieces if piece and not piece.startswith("#")]


def parse_job_entry(text: str) -> JobEntry:
    """Parse ``module.Class|FREQ``, ``module.Class|FREQ|HH:MM`` or ``module.Class|HH:MM``.

    A single metadata field holding ``:`` is a time with a frequency of ``1d``.
    Whitespace around the fields is allowed (crontabber broke on ``A | 5m``).

    Raises:
        ConfigurationError: naming the entry and what is wrong with it.
    """
    fields = [field.strip() for field in text.split("|")]
    if len(fields) < 2 or not fields[1]:
        raise ConfigurationError(f"jobs entry {text!r}", "no frequency and/or time defined")
    if len(fields) > 3:
        raise ConfigurationError(f"jobs entry {text!r}", "too many '|' fields; expected module.Class|FREQ[|HH:MM]")
    class_path = fields[0]
    if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+", class_path):
        raise ConfigurationError(f"jobs entry {text!r}", f"{class_path!r} is not a dotted module.Class path")
    time: str | None
    if len(fields) == 2 and ":" in fields[1]:
        frequency, time = "1d", fields[1]
    else:
        frequency, time = fields[1], (fields[2] if len(fields) == 3 else None)
    entry = JobEntry(class_path, frequency, time, text)
    try:
        parse_schedule(frequency, time)
    except ValueError as exc:
        raise ConfigurationError(f"jobs entry {text!r}", str(exc)) from None
    return entry


def never_ran(state: JobState | None) -> bool:
    """Whether no run of the job has ended: no state row, or a row with no ``next_run``
    that no run holds (a job paused before its first tick, or whose first run died and
    was released). Such a job is due by the first-run rule of :func:`is_due`.
    """
    return state is None or (state.next_run is None and state.ongoing is None)


def first_run_due(schedule: Schedule, now: dt.datetime) -> bool:
    """The first-run rule: due at once, or with a time of day once UTC ``now`` reached it
    (plus the schedule's delay)."""
    if schedule.time is None:
        return True
    utc = (now - schedule.delay).astimezone(dt.timezone.utc)
    return (utc.hour, utc.minute) >= (schedule.time.hour, schedule.time.minute)


def is_due(state: JobState | None, schedule: Schedule, now: dt.datetime) -> bool:
    """Whether a job is due at ``now`` (crontabber's ``time_to_run``).

    - never ran (:func:`never_ran`): by :func:`first_run_due`. crontabber 0.18 has no row
      without ``next_run`` and without a marker; ours come from ``--pause`` before a first
      tick and ``--release`` of a dead first run, and such a job must not stay never due;
    - a first run in progress elsewhere (``next_run`` NULL, ``ongoing`` set): due, so the
      runner goes on to report the lock;
    - otherwise due when ``next_run < now``.
    """
    if never_ran(state):
        return first_run_due(schedule, now)
    assert state is not None
    if state.next_run is None:
        return True
    return state.next_run < now


def first_due_at(schedule: Schedule, now: dt.datetime) -> dt.datetime | None:
    """When a job that never ran became due today by its time of day (UTC), if ``now`` has
    reached it; None without a time of day (then it is due from whenever it was added)."""
    if schedule.time is None or not first_run_due(schedule, now):
        return None
    return (now - schedule.delay).astimezone(dt.timezone.utc).replace(
        hour=schedule.time.hour, minute=schedule.time.minute, second=0, microsecond=0
    ) + schedule.delay


def next_run_after(started: dt.datetime, schedule: Schedule, succeeded: bool, error_retry_time: float) -> dt.datetime:
    """The ``next_run`` written when an attempt that began at ``started`` ends.

    After a failure: ``started + error_retry_time`` seconds (the runner passes
    :func:`crontabber.leases.retry_delay`, which may grow with each failure). After a success:
    ``started + frequency``, with the hour and minute replaced by the time of
    day if there is one (keeping that calendar date, as crontabber does), counted on the
    job's clock (``started - delay``) and given back on the wall clock (``+ delay``): a
    job at 23:55 with 10 minutes of jitter that started at 00:05 is next due at 00:05 the
    day after, not two days later.
    """
    if not succeeded:
        return started + dt.timedelta(seconds=error_retry_time)
    nxt = (started - schedule.delay).astimezone(dt.timezone.utc) + schedule.interval
    if schedule.time is not None:
        nxt = nxt.replace(hour=schedule.time.hour, minute=schedule.time.minute, second=0, microsecond=0)
    return nxt + schedule.delay


def backfill_dates(last_success: dt.datetime | None, schedule: Schedule, now: dt.datetime) -> list[dt.datetime]:
    """The dates a backfill job is called with, oldest first.

    With no previous success the job runs once with ``now``. Otherwise each
    whole interval since ``last_success`` (anchored to the time of day in UTC,
    so a job reached a minute late on some days does not drift) gives one date,
    strictly before ``now``. ``now`` is the job's clock: the schedule's delay (settle lag
    and jitter) is taken off first, so interval ``T`` comes once ``T + delay`` has passed.
    """
    now = now - schedule.delay
    if last_success is None:
        return [now]
    when = last_success.astimezone(dt.timezone.utc)
    if schedule.time is not None:
        when = when.replace(hour=schedule.time.hour, minute=schedule.time.minute, second=0, microsecond=0)
    dates = []
    while when + schedule.interval < now:
        when += schedule.interval
        dates.append(when)
    return dates


def dependency_block(depends_on: Sequence[str], states: Mapping[str, JobState | None], now: dt.datetime) -> str | None:
    """The reason a job may not run yet because of its parents, or None.

    Parents are checked in declared order; the first failing check wins:
    never run, errored last time, or itself overdue (``next_run`` NULL counts
    as overdue, as on crontabber under Python 2).
    """
    for parent in depends_on:
        state = states.get(parent)
        if state is None:
            return f"{parent!r} hasn't been run yet"
        if state.last_error:
            return f"{parent!r} errored last time it ran"
        if state.next_run is None or state.next_run < now:
            return f"{parent!r} hasn't recently run"
    return None


def normalize_depends_on(value: object) -> tuple[str, ...]:
    """crontabber's ``depends_on`` forms: None, a string, or an iterable of strings."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, collections.abc.Iterable):
        return tuple(str(item) for item in value)
    raise TypeError(f"depends_on must be a string or a list of strings, not {value!r}")


def dependency_order(graph: Mapping[str, Sequence[str]]) -> list[str]:
    """Order app names so parents come first; alphabetical within each layer.

    Dependencies on names that are not in ``graph`` are external: they do not
    order anything (the dependency check blocks the child at run time).
    Unlike crontabber, a list with no root job or no jobs at all is fine.

    Raises:
        ConfigurationError: on a dependency cycle, naming its members.
    """
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for name, parents in graph.items():
        sorter.add(name, *(parent for parent in parents if parent in graph))
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        cycle = " -> ".join(exc.args[1])
        raise ConfigurationError("jobs", f"dependency cycle: {cycle}") from None
    order: list[str] = []
    while sorter.is_active():
        layer = sorted(sorter.get_ready())
        order.extend(layer)
        sorter.done(*layer)
    return order


def needs_attention(state: JobState | None, now: dt.datetime) -> bool:
    """Whether a job is failing, overdue or running at ``now``: the only jobs whose alert
    rules a tick reads (:mod:`crontabber.alerts.rules`); a quiet fleet reads none."""
    if state is None:
        return False
    return state.error_count > 0 or state.ongoing is not None or lateness(state, now) is not None


def pause_active(state: JobState | None, now: dt.datetime) -> bool:
    """Whether the job is paused at ``now`` (a pause ends by itself at ``paused_until``)."""
    return state is not None and state.paused_until is not None and state.paused_until > now


def lateness(state: JobState | None, now: dt.datetime) -> dt.timedelta | None:
    """How long ago the job's next run was due: the one rule of ``--nagios``,
    ``--list-jobs`` and the dashboard.

    Counted from the end of a pause that ended after the run was due (``--resume`` ends a
    pause now), so a job just resumed, or whose pause just ran out, is not late at once:
    the next tick runs it. A job paused before its first tick (no ``next_run``) is late
    from its pause's end. None when the job is not late: no state or nothing to count from,
    not due yet, running (its ``next_run`` is written when the run ends), or paused.
    """
    if state is None or state.ongoing is not None or pause_active(state, now):
        return None
    since = state.next_run or state.paused_until
    if since is None:
        return None
    if state.paused_until is not None and state.paused_until > since:  # <= now: not paused
        since = state.paused_until
    late = now - since
    return late if late > dt.timedelta(0) else None


_RELATIVE = re.compile(r"^\s*(\d+)\s*([mhd])\s*$")


def parse_until(text: str, now: dt.datetime) -> dt.datetime:
    """When a pause ends: ``30m``, ``2h``, ``3d`` from ``now``, or a UTC date
    (``2026-11-24``, midnight) or time (``2026-11-24T06:00``, ``2026-11-24 06:00``).

    Raises:
        ValueError: anything else, or a time not after ``now``.
    """
    relative = _RELATIVE.match(text)
    if relative:
        when = now + dt.timedelta(seconds=int(relative.group(1)) * UNIT_SECONDS[relative.group(2)])
    else:
        try:
            when = dt.datetime.fromisoformat(text.strip().replace(" ", "T"))
        except ValueError:
            raise ValueError(
                f"{text!r} is neither 30m/2h/3d nor a UTC date or time (2026-11-24, 2026-11-24T06:00)"
            ) from None
        when = when.replace(tzinfo=dt.timezone.utc) if when.tzinfo is None else when
    if when <= now:
        raise ValueError(f"{minute_text(when)} is not in the future")
    return when


def parse_day(text: str) -> dt.date:
    """A ``YYYY-MM-DD`` day.

    Raises:
        ValueError: naming the expected form.
    """
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a day (YYYY-MM-DD)") from None


def rerun_dates(
    schedule: Schedule,
    last_success: dt.datetime | None,
    first: dt.date,
    last: dt.date,
    now: dt.datetime,
) -> list[dt.datetime]:
    """The dates a backfill job is called with to redo the days ``first`` to
    ``last``, oldest first: the intervals starting on those UTC days, anchored
    as the job's own backfill anchors them (its time of day, else the time of
    day of its last success, else midnight), and only those before ``now``.

    Raises:
        ValueError: ``last`` before ``first``.
    """
    if last < first:
        raise ValueError(f"--to {last} is before --date {first}")
    if schedule.time is not None:
        anchor = dt.time(schedule.time.hour, schedule.time.minute, tzinfo=dt.timezone.utc)
    elif last_success is not None:
        anchor = last_success.astimezone(dt.timezone.utc).timetz()
    else:
        anchor = dt.time(0, 0, tzinfo=dt.timezone.utc)
    start = dt.datetime.combine(first, anchor)
    # Intervals shorter than a day: the whole of each day, from the anchor's offset.
    offset = (
        dt.timedelta(hours=anchor.hour, minutes=anchor.minute, seconds=anchor.second, microseconds=anchor.microsecond)
        % schedule.interval
    )
    if schedule.interval < dt.timedelta(days=1):
        start = dt.datetime.combine(first, dt.time(0, 0, tzinfo=dt.timezone.utc)) + offset
    end = dt.datetime.combine(last + dt.timedelta(days=1), dt.time(0, 0, tzinfo=dt.timezone.utc))
    dates = []
    when = start
    while when < end and when < now:
        dates.append(when)
        when += schedule.interval
    return dates
