"""Pure scheduling logic: due checks, next runs, backfill intervals and dependency order, for
either kind of :class:`~crontabber.schedule.Schedule` (the schedule's type and the parsing of
the jobs list are :mod:`crontabber.schedule`'s, re-exported here for the callers that predate
it).

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
from .schedule import DAY as DAY
from .schedule import UNIT_SECONDS as UNIT_SECONDS
from .schedule import JobEntry as JobEntry
from .schedule import Schedule as Schedule
from .schedule import TimeOfDay as TimeOfDay
from .schedule import check_zone as check_zone
from .schedule import jitter_offset as jitter_offset
from .schedule import parse_duration as parse_duration
from .schedule import parse_frequency as parse_frequency
from .schedule import parse_job_entry as parse_job_entry
from .schedule import parse_schedule as parse_schedule
from .schedule import parse_time as parse_time
from .schedule import split_jobs_list as split_jobs_list
from .schedule import split_pieces as split_pieces
from .schedule import with_delay as with_delay
from .state import JobState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Sequence


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


def next_run_after(
    started: dt.datetime, schedule: Schedule, succeeded: bool, error_retry_time: float
) -> dt.datetime:
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


def backfill_dates(
    last_success: dt.datetime | None, schedule: Schedule, now: dt.datetime
) -> list[dt.datetime]:
    """The dates a backfill job is called with, oldest first.

    ``now`` is the job's clock: the schedule's delay (settle lag and jitter) is taken off
    first, so interval ``T`` comes once ``T + delay`` has passed. A cron expression's
    intervals are its fire times: those after ``last_success`` and before ``now``; with no
    previous success, its last fire time. crontabber's form: with no previous success the
    job runs once, with ``now`` (with a time of day: its latest time of day at or before
    ``now``, in the schedule's zone, as its next intervals will be; crontabber 0.18 used
    ``now``); otherwise each whole interval since ``last_success``
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
        return [_latest_time_of_day(schedule, now) if schedule.time is not None else now]
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


def next_interval(state: JobState, schedule: Schedule, is_backfill: bool) -> dt.datetime | None:
    """The time of the first interval the job has not done: after a backfill job's last
    interval (its ``last_success``) the next (:func:`next_interval_after`); after another
    job's last successful start, its next nominal run (``next_run`` before the delay)."""
    if state.last_success is None:
        return None
    if is_backfill:
        return next_interval_after(schedule, state.last_success)
    return next_run_after(state.last_success, schedule, True, 0) - schedule.delay


def _local(when: dt.datetime, schedule: Schedule) -> dt.datetime:
    """``when`` on the clocks of the schedule's zone."""
    if schedule.zone == "UTC":
        return when.astimezone(dt.timezone.utc)
    from .cron import zone_of

    return when.astimezone(zone_of(schedule.zone))


def _latest_time_of_day(schedule: Schedule, now: dt.datetime) -> dt.datetime:
    """The latest instant at or before ``now`` at which the schedule's zone reads its time of
    day (today's, or yesterday's when today's is still to come)."""
    local = _anchored(now, schedule)
    while _resolve(local, schedule) > now:
        local -= dt.timedelta(days=1)
    return _resolve(local, schedule)


def _anchored(
    when: dt.datetime,
    schedule: Schedule,
    plus: dt.timedelta = dt.timedelta(0),
) -> dt.datetime:
    """The naive wall-clock time of ``when`` in the schedule's zone, ``plus`` later on that
    clock, on the schedule's time of day."""
    assert schedule.time is not None
    local = _local(when, schedule).replace(tzinfo=None) + plus
    return local.replace(
        hour=schedule.time.hour, minute=schedule.time.minute, second=0, microsecond=0
    )


def _resolve(local: dt.datetime, schedule: Schedule) -> dt.datetime:
    """The instant (UTC) at which the schedule's zone reads the naive wall-clock time
    ``local``, by the fixed-time DST rule (:func:`crontabber.cron.wall_time`)."""
    if schedule.zone == "UTC":
        return local.replace(tzinfo=dt.timezone.utc)
    from .cron import wall_time

    return wall_time(local.date(), local.time(), schedule.zone)


def dependency_block(
    depends_on: Sequence[str], states: Mapping[str, JobState | None], now: dt.datetime
) -> str | None:
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
                f"{text!r} is neither 30m/2h/3d nor a UTC date or time (2026-11-24, "
                "2026-11-24T06:00)"
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
        dt.timedelta(
            hours=anchor.hour,
            minutes=anchor.minute,
            seconds=anchor.second,
            microseconds=anchor.microsecond,
        )
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
