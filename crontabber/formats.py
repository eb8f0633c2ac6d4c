"""Every time format and message format of the commands, the dashboard and the jobs.

A time a person reads is UTC, in one of the forms here: :func:`utc_text` (to the second,
``UTC`` named), :func:`minute_text` (to the minute), :func:`stamp` (a table's column, whose
header says UTC), :func:`relative` (``in 1h57m``, ``2m19s ago``: the one relative form) and
:func:`absolute`,
:func:`took` for durations and
:func:`interval_range` for a run's intervals, :func:`metrics_text` for its metrics.
JSON carries ISO 8601 (:mod:`crontabber.jsonout`).
A message on one line: :func:`one_line`; data from outside made safe for a terminal:
:func:`printable` (:func:`printable_lines` keeps the line breaks). Exported by :mod:`crontabber` for
the jobs.
"""

from __future__ import annotations

import datetime as dt
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Mapping


def utc_text(moment: dt.datetime | None) -> str:
    """``2026-11-23 12:00:00 UTC`` (``-`` for none): the one time format of the commands."""
    if moment is None:
        return "-"
    return f"{moment.astimezone(dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


def minute_text(moment: dt.datetime) -> str:
    """``2026-11-23 12:00 UTC``: a time people choose to the minute (a pause's end, an
    interval, a next run)."""
    return f"{moment.astimezone(dt.timezone.utc):%Y-%m-%d %H:%M} UTC"


def until_resumed(until: dt.datetime | None) -> bool:
    """Whether ``until`` is the end of a pause that has none (``on_breach = pause``): stored
    as PostgreSQL's ``infinity``, which psycopg2 reads as the largest datetime. Such a pause
    is shown as ``until resumed``, never as a date; ``--json`` carries ``null``."""
    return until is not None and until.replace(tzinfo=None) == dt.datetime.max


def pause_end(until: dt.datetime, shown: Callable[[dt.datetime], str] = minute_text) -> str:
    """``until 2026-11-23 12:00 UTC`` (the time as ``shown`` writes it), or ``until resumed``
    for a pause without an end (:func:`until_resumed`)."""
    return "until resumed" if until_resumed(until) else f"until {shown(until)}"


def stamp(when: dt.datetime) -> str:
    """``2026-11-22 05:17:19`` in UTC (a table column whose header says UTC)."""
    return f"{when.astimezone(dt.timezone.utc):%Y-%m-%d %H:%M:%S}"


def iso_z(when: dt.datetime) -> str:
    """``2026-11-22T05:17:19Z``: a machine-readable UTC time in a web page."""
    return f"{when.astimezone(dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ}"


def utc_iso(when: dt.datetime) -> str:
    """``2026-11-22T05:17:19.250000+00:00``: ISO 8601 in UTC whatever the database session's
    zone, so that every host writes one text for one moment (an alert's subject is its key
    across the fleet, and PagerDuty's dedup key)."""
    return when.astimezone(dt.timezone.utc).isoformat()


def day_text(day: dt.date | dt.datetime) -> str:
    """``2026-11-22``: a day (a backfill interval of a daily job)."""
    return f"{day:%Y-%m-%d}"


def short_span(seconds: float) -> str:
    """A span in up to two adjacent units, rounded down: ``45s``, ``2m19s``, ``1h57m``,
    ``2d3h`` (``1h``, not ``1h0m``): the one span of :func:`relative`."""
    whole = max(0, int(seconds))
    units = ((86400, "d"), (3600, "h"), (60, "m"), (1, "s"))
    for index, (size, unit) in enumerate(units):
        if whole >= size or size == 1:
            text = f"{whole // size}{unit}"
            if index + 1 < len(units):
                next_size, next_unit = units[index + 1]
                rest = whole % size // next_size
                text += f"{rest}{next_unit}" if rest else ""
            return text
    return "0s"  # not reached: the last unit always applies


def span_text(span: dt.timedelta) -> str:
    """An exact span in its units: ``6h``, ``7m30s``, ``1d2h``, ``0s``."""
    whole = int(span.total_seconds())
    parts = [
        f"{amount}{unit}"
        for amount, unit in (
            (whole // 86400, "d"),
            (whole % 86400 // 3600, "h"),
            (whole % 3600 // 60, "m"),
            (whole % 60, "s"),
        )
        if amount
    ]
    return "".join(parts) or "0s"


def relative(when: dt.datetime | None, now: dt.datetime, empty: str = "-") -> str:
    """``3m ago``, ``in 1h57m``, ``now`` (within a second), or ``empty``: the one relative
    time of every command, the dashboard and the nagios check (:func:`short_span`)."""
    if when is None:
        return empty
    seconds = (when - now).total_seconds()
    if abs(seconds) < 1:
        return "now"
    return f"in {short_span(seconds)}" if seconds > 0 else f"{short_span(-seconds)} ago"


def absolute(when: dt.datetime | None, now: dt.datetime, empty: str = "-") -> str:
    """``2026-11-22 05:17:19 (3m ago)``, or ``empty``."""
    if when is None:
        return empty
    return f"{stamp(when)} ({relative(when, now)})"


def took(span: dt.timedelta | None) -> str:
    """A duration: ``0.42s``, ``12.3s``, ``3m12s``, ``1h02m``, ``-`` when unknown."""
    if span is None:
        return "-"
    seconds = span.total_seconds()
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def interval(success: dt.datetime | None) -> str:
    """One interval of a backfill job: ``2026-11-24`` (midnight), ``2026-11-24 10:00``, ``-``."""
    if success is None:
        return "-"
    utc = success.astimezone(dt.timezone.utc)
    return (
        f"{utc:%Y-%m-%d}"
        if (utc.hour, utc.minute, utc.second) == (0, 0, 0)
        else f"{utc:%Y-%m-%d %H:%M}"
    )


def interval_range(first: dt.datetime, last: dt.datetime, count: int) -> str:
    """``2026-11-24``, ``2026-11-24 10:00..11:00 (2)`` or ``2026-11-01..2026-11-24 (24)``."""
    if count == 1:
        return interval(first)
    first, last = first.astimezone(dt.timezone.utc), last.astimezone(dt.timezone.utc)
    if first.date() == last.date():  # intervals within one day: their times say which
        return f"{interval(first)}..{last:%H:%M} ({count})"
    return f"{first:%Y-%m-%d}..{last:%Y-%m-%d} ({count})"


def counted(count: int, name: str) -> str:
    """``1 time``, ``2 times``: a count with its noun, never ``time(s)``."""
    return f"{count} {name}" if count == 1 else f"{count} {name}s"


def metrics_text(metrics: Mapping[str, float] | None) -> str:
    """A run's metrics as ``bytes_freed=40960 keys_deleted=12`` (by name: the ledger's jsonb
    keeps no order); '' for none. A float below 1 keeps 4 significant digits, another 2
    decimals."""
    return " ".join(f"{name}={_metric(value)}" for name, value in sorted((metrics or {}).items()))


def _metric(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:.4g}" if abs(value) < 1 else f"{value:.2f}".rstrip("0").rstrip(".")


def one_line(text: str | None) -> str:
    """A message on one line: a traceback-like text keeps its words, not its breaks; the
    control characters left are escaped (:func:`printable`)."""
    return printable(" ".join((text or "").split()))


# C0, DEL, C1; the Unicode bidi embeddings, overrides, isolates and marks; the line and
# paragraph separators: what can move the cursor, recolour or reorder a terminal's text
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str | None) -> str:
    """``text`` safe for a terminal: each control character (C0 including tab and newline,
    DEL, C1), bidi control and line/paragraph separator as ``\\xHH`` or ``\\uHHHH``; other
    characters unchanged. For every human output that shows data from uploaders or batch
    writers (file names, keys, error messages); JSON output escapes on its own."""
    return _UNSAFE.sub(_escape, text or "")


def printable_lines(text: str | None) -> str:
    """``text`` with each line :func:`printable` and its line breaks (``\\n``) kept: a
    traceback in a log."""
    return "\n".join(printable(line) for line in (text or "").split("\n"))
