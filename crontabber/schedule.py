"""A job's schedule, as the jobs list and its options write it: the :class:`Schedule` value
(crontabber's frequency and time of day, or a cron expression; its zone; its settle lag and
jitter), the entries of the ``jobs`` list, and their parsing, each refusal one line naming the
bad part. What the schedule means over time (due, next run, backfill intervals) is
:mod:`crontabber.scheduling`'s; cron expressions and zones are evaluated by
:mod:`crontabber.cron`, imported only for a schedule that has one.
"""

from __future__ import annotations

import datetime as dt
import re

from .errors import ConfigurationError
from .frozen import Frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping

UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400}
DAY = 86400
# A job that runs less than once a year is not a cron job; the cap also keeps
# next-run arithmetic far from datetime's year 9999.
MAX_FREQUENCY_SECONDS = 366 * DAY

_FREQUENCY = re.compile(r"^\s*(\d+)\s*([mhd])\s*$")
_TIME = re.compile(r"^\s*(\d{1,2}):(\d{1,2})\s*$")


class TimeOfDay(Frozen):
    """A time of day (``HH:MM``) at which a job runs, in its schedule's time zone."""

    hour: int
    minute: int

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

    frequency: str
    seconds: int
    time: TimeOfDay | None
    lag: dt.timedelta = dt.timedelta(0)
    jitter: dt.timedelta = dt.timedelta(0)
    zone: str = "UTC"
    expression: str | None = None

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
        parse_duration(config.get("settle_lag", 0)),
        parse_duration(config.get("jitter", 0)),
        app_name,
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
            f"bad duration {raw!r}: expected seconds or a number and a unit m, h or d (e.g. 600, "
            "10m, 6h)"
        ) from None
    if seconds < 0:
        raise ValueError(f"bad duration {raw!r}: must not be negative")
    return dt.timedelta(seconds=seconds)


class JobEntry(Frozen):
    """One line of the ``jobs`` list: ``module.Class|FREQ[|HH:MM]``."""

    class_path: str
    frequency: str
    time: str | None
    text: str

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
        raise ValueError(
            f"bad frequency {text!r}: expected a number and a unit m, h or d (e.g. 5m, 1d)"
        )
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
            raise ValueError(
                f"a time of day ({time}) needs a frequency of at least 1d, not {frequency!r}"
            )
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
    spaces) rather than crontabber's frequency (``5m``, ``1d``, and ``5 m``, which crontabber
    read as ``5m``)."""
    stripped = text.strip()
    if _FREQUENCY.match(stripped):
        return False
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
        raise ConfigurationError(
            f"jobs entry {text!r}", f"{class_path!r} is not a dotted module.Class path"
        )
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
