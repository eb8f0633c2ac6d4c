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
import itertools
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
    """A time of day (``HH:MM``) at which a job runs, in its schedule's time zone."""

    __slots__ = ("hour", "minute")
    hour: int
    minute: int

    def __init__(self, hour: int, minute: int) -> None:
        setfield(self, "hour", hour)
        setfield(self, "minute", minute)

    def __str__(self) -> str:
        return f"{self.hour:02d}:{self.minute:02d}"


class Schedule(Frozen):
    """When a job runs, of one of two kinds, in a time zone, and how late it sees the clock.

    - crontabber's frequency (``5m``, ``1d``) and optional time of day (``05:00``, read on
      the clocks of ``zone``); ``seconds`` is the frequency;
    - a cron expression (``0 3 * * 1-5``, ``@daily``): ``frequency`` holds it as written,
      ``expression`` its five fields (macros expanded), ``seconds`` is 0; its fire times are
      :mod:`crontabber.cron`'s, on the clocks of ``zone``.

    ``zone`` is an IANA name, ``UTC`` by default (crontabber's only zone). ``lag`` (the settle
    lag) and ``jitter`` (a fixed offset derived from the job's name, :func:`jitter_offset`) add
    up to :attr:`delay`: the job runs as if the time were ``now - delay``. A daily job at 06:00
    with a delay of 7 minutes is due at 06:07; a backfill job's interval ``T`` runs once ``T +
    delay`` has passed (its data has settled). ``next_run`` is stored as the wall-clock time it
    is due (the delay included), so the due check, lateness and every view read it as they
    always did.
    """

    __slots__ = ("frequency", "seconds", "time", "lag", "jitter", "zone", "expression")
    frequency: str
    seconds: int
    time: TimeOfDay | None
    lag: dt.timedelta
    jitter: dt.timedelta
    zone: str
    expression: str | None

    def __init__(
        self,
        frequency: str,
        seconds: int,
        time: TimeOfDay | None,
        lag: dt.timedelta = dt.timedelta(0),
        jitter: dt.timedelta = dt.timedelta(0),
        zone: str = "UTC",
        expression: str | None = None,
    ) -> None:
        setfield(self, "frequency", frequency)
        setfield(self, "seconds", seconds)
        setfield(self, "time", time)
        setfield(self, "lag", lag)
        setfield(self, "jitter", jitter)
        setfield(self, "zone", zone)
        setfield(self, "expression", expression)

    def __str__(self) -> str:
        """The schedule as written, and its zone when it has one and it matters:
        ``1d @ 05:00``, ``0 3 * * 1-5 Europe/Berlin``."""
        text = f"{self.frequency} @ {self.time}" if self.time else self.frequency
        return f"{text} {self.zone}" if self.zoned else text

    @property
    def is_cron(self) -> bool:
        """Whether this is a cron expression (else crontabber's frequency)."""
        return self.expression is not None

    @property
    def zoned(self) -> bool:
        """Whether the schedule reads the clocks of a zone other than UTC (a frequency
        without a time of day reads none)."""
        return self.zone != "UTC" and (self.is_cron or self.time is not None)

    @property
    def interval(self) -> dt.timedelta:
        """crontabber's frequency; for a cron expression, the shortest time between two
        of its fire times (:func:`crontabber.cron.shortest_gap`)."""
        if self.expression is not None:
            from .cron import shortest_gap

            return shortest_gap(self.expression, self.zone)
        return dt.timedelta(seconds=self.seconds)

    @property
    def delay(self) -> dt.timedelta:
        """How late the job sees the clock: its settle lag plus its jitter."""
        return self.lag + self.jitter

    def in_zone(self, zone: str) -> "Schedule":
        """This schedule read on the clocks of ``zone`` (checked: :func:`check_zone`).

        Raises:
            ValueError: an unknown zone.
        """
        return self.replace(zone=check_zone(zone))

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
            what = (
                f"the shortest time between the job's fire times ({self.interval})"
                if self.is_cron
                else f"the job's frequency ({self.frequency})"
            )
            raise ValueError(f"settle lag + jitter ({lag + spread}) must be shorter than {what}")
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


def parse_schedule(frequency: str, time: str | None, zone: str = "UTC") -> Schedule:
    """Validate a frequency and optional time together, or a cron expression, read on the
    clocks of ``zone``.

    A time of day needs a frequency of at least one day (crontabber only
    checked this in ``--configtest``; we refuse it up front). A cron expression
    (:func:`crontabber.cron.looks_like_cron`) takes no time of day.

    Raises:
        ValueError: naming the bad part (``bad minute field '61'``, an unknown zone).
    """
    if looks_like_cron(frequency):
        from .cron import check_expression

        if time:
            written = frequency.strip()
            raise ValueError(f"a cron expression ({written!r}) takes no time of day ({time})")
        text = " ".join(frequency.split())
        schedule = Schedule(text, 0, None, expression=check_expression(text))
    else:
        seconds = parse_frequency(frequency)
        time_of_day = parse_time(time) if time else None
        if time_of_day is not None and seconds < DAY:
            raise ValueError(f"a time of day ({time}) needs a frequency of at least 1d, not {frequency!r}")
        schedule = Schedule(frequency.strip(), seconds, time_of_day)
    return schedule if zone in ("", "UTC") else schedule.in_zone(zone)


def check_zone(text: str) -> str:
    """A ``time_zone`` option's value: an IANA zone name (``UTC`` when empty), checked
    (zoneinfo is imported only for a zone other than UTC).

    Raises:
        ValueError: ``unknown time zone 'Europe/Berln'``.
    """
    if str(text).strip() in ("", "UTC"):
        return "UTC"
    from .cron import check_zone as check

    return check(str(text))


def looks_like_cron(text: str) -> bool:
    """Whether a schedule's text is a cron expression (a macro, or fields separated by
    spaces) rather than crontabber's frequency (``5m``, ``1d``)."""
    stripped = text.strip()
    return stripped.startswith("@") or len(stripped.split()) > 1


# Entries are separated by newlines, semicolons and commas, as in crontabber; a comma inside a
# cron expression (``0 9,17 * * *``) is none: a separating comma is followed by the end, a
# separator, a comment or the next entry's ``module.Class|``.
_SEPARATOR = re.compile(r"[\n;]|,(?=\s*(?:$|[,;#\n]|[A-Za-z_][\w.]*\s*\|))")


def split_pieces(text: str) -> list[str]:
    """The pieces of a ``jobs`` option, stripped, blank and commented ones included."""
    return [piece.strip() for piece in _SEPARATOR.split(text or "")]


def split_jobs_list(text: str) -> list[str]:
    """Split the ``jobs`` option on newlines, commas and semicolons (not on the commas of a
    cron expression's lists).

    Blank pieces and pieces starting with ``#`` are dropped, as crontabber does.
    """
    return [piece for piece in split_pieces(text) if piece and not piece.startswith("#")]


def parse_job_entry(text: str) -> JobEntry:
    """Parse ``module.Class|FREQ``, ``module.Class|FREQ|HH:MM``, ``module.Class|HH:MM`` or
    ``module.Class|CRON EXPRESSION`` (``0 3 * * 1-5``, ``@daily``).

    A single metadata field holding ``:`` is a time with a frequency of ``1d``.
    Whitespace around the fields is allowed (crontabber broke on ``A | 5m``).

    Raises:
        ConfigurationError: naming the entry and what is wrong with it.
    """
    fields = [field.strip() for field in text.split("|")]
    if len(fields) < 2 or not fields[1]:
        raise ConfigurationError(f"jobs entry {text!r}", "no frequency and/or time defined")
    if len(fields) > 3:
        raise ConfigurationError(
            f"jobs entry {text!r}",
            "too many '|' fields; expected module.Class|FREQ[|HH:MM] or module.Class|CRON",
        )
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
    """The first-run rule: due at once, or, with a time of day or a cron expression, once
    one of its times of today (in its zone) has passed by ``now`` (less the schedule's
    delay): crontabber's rule for ``HH:MM``, the same for the fire times of an expression."""
    if schedule.time is None and not schedule.is_cron:
        return True
    return first_due_at(schedule, now) is not None


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
    """When a job that never ran became due today (in its zone) by its time of day or its
    last fire time of today, if ``now`` has reached it; None without one (then it is due
    from whenever it was added)."""
    clock = now - schedule.delay
    if schedule.expression is not None:
        from .cron import previous_fire

        fired = previous_fire(schedule.expression, schedule.zone, clock)
        if fired is None or _local(fired, schedule).date() != _local(clock, schedule).date():
            return None
        return fired + schedule.delay
    if schedule.time is None:
        return None
    today = _resolve(_anchored(clock, schedule), schedule)
    return today + schedule.delay if clock >= today else None


def next_run_after(started: dt.datetime, schedule: Schedule, succeeded: bool, error_retry_time: float) -> dt.datetime:
    """The ``next_run`` written when an attempt that began at ``started`` ends.

    After a failure: ``started + error_retry_time`` seconds (the runner passes
    :func:`crontabber.leases.retry_delay`, which may grow with each failure). After a success,
    counted on the job's clock (``started - delay``) and given back on the wall clock (``+
    delay``): a cron expression's first fire time after it; else ``started + frequency``,
    with the hour and minute replaced by the time of day (in the schedule's zone) if there is
    one (keeping that calendar date, as crontabber does). A job at 23:55 with 10 minutes of
    jitter that started at 00:05 is next due at 00:05 the day after, not two days later.
    """
    if not succeeded:
        return started + dt.timedelta(seconds=error_retry_time)
    clock = started - schedule.delay
    if schedule.expression is not None:
        from .cron import next_fire

        return next_fire(schedule.expression, schedule.zone, clock) + schedule.delay
    if schedule.time is None:
        return clock.astimezone(dt.timezone.utc) + schedule.interval + schedule.delay
    return _resolve(_anchored(clock, schedule, plus=schedule.interval), schedule) + schedule.delay


def schedule_key(schedule: Schedule) -> str | None:
    """What the audit trail records of a job's schedule (:mod:`crontabber.schedule_store`):
    the schedule as written with its zone; None for crontabber's form in UTC, the schedule
    every state row written before cron expressions and zones was computed under."""
    return str(schedule) if schedule.is_cron or schedule.zoned else None


def rescheduled_next_run(state: JobState, schedule: Schedule) -> dt.datetime | None:
    """The ``next_run`` of a job whose schedule changed: as if the new schedule had been in
    force when its last run started (a fire time missed since is due at once). None: keep
    ``next_run``: no run yet, a run going (its end computes it), or a failure's retry."""
    if state.ongoing is not None or state.error_count:
        return None
    if state.last_run is None or state.next_run is None:
        return None
    return next_run_after(state.last_run, schedule, True, 0)


def upcoming(schedule: Schedule, after: dt.datetime, count: int) -> list[dt.datetime]:
    """The next ``count`` times the job is due after ``after`` if each run starts on time
    and succeeds (``--next``): a cron expression's next fire times (plus the delay); for
    crontabber's form, ``next_run_after`` of a run at ``after``, then of each."""
    times: list[dt.datetime] = []
    when = after
    for _ in range(count):
        when = next_run_after(when, schedule, True, 0)
        times.append(when)
    return times


def backfill_dates(last_success: dt.datetime | None, schedule: Schedule, now: dt.datetime) -> list[dt.datetime]:
    """The dates a backfill job is called with, oldest first.

    ``now`` is the job's clock: the schedule's delay (settle lag and jitter) is taken off
    first, so interval ``T`` comes once ``T + delay`` has passed. A cron expression's
    intervals are its fire times: those after ``last_success`` and before ``now``; with no
    previous success, its last fire time. crontabber's form: with no previous success the
    job runs once with ``now``; otherwise each whole interval since ``last_success``
    (anchored to the time of day in the schedule's zone, so a job reached a minute late on
    some days does not drift) gives one date, strictly before ``now``.
    """
    now = now - schedule.delay
    if schedule.expression is not None:
        from .cron import fires, previous_fire

        if last_success is None:
            return [previous_fire(schedule.expression, schedule.zone, now) or now]
        after = fires(schedule.expression, schedule.zone, last_success)
        return list(itertools.takewhile(lambda when: when < now, after))
    if last_success is None:
        return [now]
    if schedule.time is None:
        when = last_success.astimezone(dt.timezone.utc)
        dates = []
        while when + schedule.interval < now:
            when += schedule.interval
            dates.append(when)
        return dates
    local = _anchored(last_success, schedule)  # stepped on the zone's clock
    dates = []
    while _resolve(local + schedule.interval, schedule) < now:
        local += schedule.interval
        dates.append(_resolve(local, schedule))
    return dates


def next_interval_after(schedule: Schedule, when: dt.datetime) -> dt.datetime:
    """The interval a backfill job runs after the one at ``when``: the next fire time of a
    cron expression; crontabber's form: ``when`` (on its time of day) plus the frequency."""
    if schedule.expression is not None:
        from .cron import next_fire

        return next_fire(schedule.expression, schedule.zone, when)
    if schedule.time is None:
        return when.astimezone(dt.timezone.utc) + schedule.interval
    return _resolve(_anchored(when, schedule) + schedule.interval, schedule)


def _local(when: dt.datetime, schedule: Schedule) -> dt.datetime:
    """``when`` on the clocks of the schedule's zone."""
    if schedule.zone == "UTC":
        return when.astimezone(dt.timezone.utc)
    from .cron import zone_of

    return when.astimezone(zone_of(schedule.zone))


def _anchored(
    when: dt.datetime,
    schedule: Schedule,
    plus: dt.timedelta = dt.timedelta(0),
) -> dt.datetime:
    """The naive wall-clock time of ``when`` in the schedule's zone, ``plus`` later on that
    clock, on the schedule's time of day."""
    assert schedule.time is not None
    local = _local(when, schedule).replace(tzinfo=None) + plus
    return local.replace(hour=schedule.time.hour, minute=schedule.time.minute, second=0, microsecond=0)


def _resolve(local: dt.datetime, schedule: Schedule) -> dt.datetime:
    """The instant (UTC) at which the schedule's zone reads the naive wall-clock time
    ``local``, by the fixed-time DST rule (:func:`crontabber.cron.wall_time`)."""
    if schedule.zone == "UTC":
        return local.replace(tzinfo=dt.timezone.utc)
    from .cron import wall_time

    return wall_time(local.date(), local.time(), schedule.zone)


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
    ``last``, oldest first, only those before ``now``: a cron expression's fire times on
    those days of its zone; for crontabber's form, the intervals starting on those days
    (UTC, or the zone's with a zoned time of day), anchored as the job's own backfill
    anchors them (its time of day, else the time of day of its last success, else midnight).

    Raises:
        ValueError: ``last`` before ``first``.
    """
    if last < first:
        raise ValueError(f"--to {last} is before --date {first}")
    if schedule.expression is not None or schedule.zoned:
        return _zoned_rerun_dates(schedule, first, last, now)
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


def _zoned_rerun_dates(
    schedule: Schedule,
    first: dt.date,
    last: dt.date,
    now: dt.datetime,
) -> list[dt.datetime]:
    """:func:`rerun_dates` of a cron expression or a zoned time of day: the days are the
    zone's (from the first instant of ``first`` to the first of the day after ``last``)."""
    midnight = dt.time(0, 0)
    start = _resolve(dt.datetime.combine(first, midnight), schedule)
    end = min(now, _resolve(dt.datetime.combine(last + dt.timedelta(days=1), midnight), schedule))
    if schedule.expression is not None:
        from .cron import fires_between

        return fires_between(schedule.expression, schedule.zone, start, end)
    assert schedule.time is not None
    local = dt.datetime.combine(first, dt.time(schedule.time.hour, schedule.time.minute))
    dates = []
    while (when := _resolve(local, schedule)) < end:
        dates.append(when)
        local += schedule.interval
    return dates
