"""Cron expressions and time zones: Debian cron's five fields (evaluated by cronsim, which
was written to match Debian cron) and IANA zones (zoneinfo), as pure functions.

Every function takes and returns aware datetimes and never reads the clock. Fire times come
back in UTC. :mod:`crontabber.scheduling` imports this module only for a job that has a cron
expression or a time zone, so a tick of a fleet with neither never loads cronsim or zoneinfo.

The one DST rule (Debian cron's, as cronsim follows it; docs/writing-a-job.md shows it with
examples): an expression whose minute and hour fields both start with something else than
``*`` is a job at fixed wall-clock times. It is evaluated on the wall clock: a time the clocks
skip runs at the first minute that exists after it, a time that happens twice runs once, at
its first occurrence. Any other expression (``*/15 * * * *``, ``0 * * * *``, ``5 */2 * * *``)
follows elapsed time: it fires at each real instant whose wall-clock reading matches, so a
skipped hour has no fires and a repeated hour fires again. A ``HH:MM`` of crontabber's form
with a time zone follows the fixed-time rule.
"""

from __future__ import annotations

import datetime as dt
import functools

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

UTC = dt.timezone.utc
SECOND = dt.timedelta(seconds=1)
MINUTE = dt.timedelta(minutes=1)
YEAR = dt.timedelta(days=366)

#: Debian cron's macros (crontab(5)); ``@reboot`` has no fire times, so it is refused.
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
# cronsim's messages name its six fields (seconds first); ours are Debian's five.
_CRONSIM_FIELDS = {
    "Bad minute": 0,
    "Bad hour": 1,
    "Bad day-of-month": 2,
    "Bad month": 3,
    "Bad day-of-week": 4,
}
# Where "never fires" is checked from; cronsim gives up after 50 years without a match.
_PROBE_START = dt.datetime(2000, 1, 1, tzinfo=UTC)


def expand(text: str) -> str:
    """The five fields of an expression as written: macros expanded, spaces collapsed,
    upper case (cronsim's names are upper case; Debian cron's are case-insensitive)."""
    stripped = " ".join(text.split())
    return MACROS.get(stripped.lower(), stripped).upper()


@functools.lru_cache(maxsize=256)
def check_expression(text: str) -> str:
    """Validate a five-field expression or macro and return its five fields (:func:`expand`).

    Raises:
        ValueError: one line naming the field (``bad minute field '61'``), a wrong number
            of fields, a macro we do not have, or an expression that never fires.
    """
    from cronsim import CronSim, CronSimError

    fields = expand(text)
    parts = fields.split()
    if fields.startswith("@"):
        raise ValueError(f"unknown macro {text.strip()!r}: expected one of {', '.join(MACROS)}")
    if len(parts) != 5:
        raise ValueError(
            f"bad cron expression {text.strip()!r}: expected 5 fields (minute hour "
            f"day-of-month month day-of-week), got {len(parts)}"
        )
    try:
        iterator = CronSim(fields, _PROBE_START)
    except CronSimError as exc:
        raise ValueError(_field_problem(str(exc), parts)) from None
    try:
        next(iterator)
    except StopIteration:
        raise ValueError(f"cron expression {text.strip()!r} never fires") from None
    return fields


def _field_problem(message: str, parts: list[str]) -> str:
    """cronsim's ``Bad minute`` as ``bad minute field '61'``; a day of the month that no
    month of the expression has (``0 0 30 2 *``) as "never fires"."""
    from cronsim import CronSim, CronSimError

    index = _CRONSIM_FIELDS.get(message)
    if index is None:
        return f"bad cron expression {' '.join(parts)!r}: {message}"
    if index == 2:
        try:  # the day parses on its own: it is the months that never have it
            CronSim(" ".join([*parts[:3], "*", parts[4]]), _PROBE_START)
        except CronSimError:
            pass
        else:
            written, days, months = " ".join(parts), parts[2], parts[3]
            return f"cron expression {written!r} never fires (no month {months!r} has day {days!r})"
    return f"bad {FIELDS[index]} field {parts[index]!r}"


def check_zone(name: str) -> str:
    """Validate an IANA time zone name (``Europe/Berlin``); empty means ``UTC``.

    Raises:
        ValueError: ``unknown time zone 'Europe/Berln'``.
    """
    name = name.strip()
    if name in ("", "UTC"):
        return "UTC"
    zone_of(name)
    return name


@functools.lru_cache(maxsize=64)
def zone_of(name: str) -> dt.tzinfo:
    """The tzinfo of a zone name (``UTC``: the stdlib's fixed UTC).

    Raises:
        ValueError: the name is no zone of the system's (or the tzdata package's) database.
    """
    if name == "UTC":
        return UTC
    import zoneinfo

    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}") from None


def _exists(local: dt.datetime) -> bool:
    """Whether an aware wall-clock time happens (it is no time the clocks skip)."""
    return local == local.astimezone(UTC).astimezone(local.tzinfo)


def wall_time(day: dt.date, time: dt.time, zone: str) -> dt.datetime:
    """The instant (UTC) at which ``zone``'s clocks read ``time`` on ``day``, by the
    fixed-time rule: a time the clocks skip is the first minute that exists after it; a
    time read twice is its first occurrence. For a day that does not exist (Pacific/Apia,
    2011-12-30) that is the first minute of the next one."""
    tzinfo = zone_of(zone)
    local = dt.datetime.combine(day, time.replace(tzinfo=None)).replace(tzinfo=tzinfo, fold=0)
    while not _exists(local):
        local += MINUTE
    return local.astimezone(UTC)


def fires(expression: str, zone: str, after: dt.datetime) -> Iterator[dt.datetime]:
    """The fire times of a checked expression strictly after ``after``, in UTC, oldest
    first, endless (or until cronsim finds no match within 50 years)."""
    from cronsim import CronSim

    last = after.astimezone(UTC)
    iterator = CronSim(expression, after.astimezone(zone_of(zone)))
    for fire in iterator:
        when = fire.astimezone(UTC)
        # cronsim evaluates a fixed-time expression on the wall clock: from a start in the
        # second occurrence of a repeated hour, its first fire may be the first occurrence
        # of a later wall-clock time, before the start. A fire is always after the start.
        if when > last:
            last = when
            yield when


def next_fire(expression: str, zone: str, after: dt.datetime) -> dt.datetime:
    """The first fire time strictly after ``after`` (UTC).

    Raises:
        ValueError: no fire within 50 years (a checked expression always has one).
    """
    for when in fires(expression, zone, after):
        return when
    raise ValueError(f"cron expression {expression!r} never fires after {after.isoformat()}")


def previous_fire(expression: str, zone: str, at: dt.datetime) -> dt.datetime | None:
    """The last fire time at or before ``at`` (UTC); None if there is none within 50 years.

    Found forwards from a start early enough to hold one, so it agrees with
    :func:`next_fire` by construction (cronsim's reverse iteration treats the DST
    transitions its own way)."""
    span = dt.timedelta(hours=1)
    while span <= dt.timedelta(days=366 * 60):
        found = None
        for when in fires(expression, zone, at - span):
            if when > at:
                break
            found = when
        if found is not None:
            return found
        span *= 8
    return None


def fires_between(
    expression: str,
    zone: str,
    start: dt.datetime,
    end: dt.datetime,
) -> list[dt.datetime]:
    """The fire times ``t`` with ``start <= t < end`` (UTC), oldest first."""
    found = []
    for when in fires(expression, zone, start - SECOND):
        if when >= end:
            break
        if when >= start:
            found.append(when)
    return found


@functools.lru_cache(maxsize=64)
def shortest_gap(expression: str, zone: str) -> dt.timedelta:
    """The shortest time between two fire times in the year after 2000-01-01 (its DST days
    included), or among its first 1000 if it fires more often (then its fields repeat
    within days, DST aside): the delay check of a job with jitter or a settle lag, made as
    its configuration loads (~10 ms)."""
    gap = dt.timedelta(days=366 * 50)
    previous = None
    for count, when in enumerate(fires(expression, zone, _PROBE_START)):
        if previous is not None:
            gap = min(gap, when - previous)
        previous = when
        if count >= 1000 or gap <= MINUTE or (count and when - _PROBE_START > YEAR):
            break
    return gap
