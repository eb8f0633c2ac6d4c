"""``--next N``: when will it run? Parse, call, print.

    python -m crontabber --next N --schedule EXPR [--time-zone ZONE] [--after ISO-8601] [--json]
    python -m crontabber --next N --job NAME [--after ISO-8601] [--json]

``--schedule`` needs no configuration and no database: any cron expression or crontabber
frequency (``1d|05:00`` as in the jobs list), read on the clocks of ``--time-zone`` (UTC when
not given). ``--job`` reads the configured job's schedule, zone and delay (no database: the
times are its schedule's, from ``--after``, as if each run started on time). ``--after``
defaults to the host's clock; a time without an offset is read in the schedule's zone.
Text: one time a line, on the zone's clocks with their offset (and in UTC when the zone is
another). ``--json``: a list of UTC ISO 8601 strings.
"""

from __future__ import annotations

import datetime as dt
from typing import TextIO

from .. import jsonout
from ..config.catalog import Job, find_job
from ..errors import ConfigurationError, JobNotFound
from ..schedule import Schedule, check_zone, parse_schedule
from ..scheduling import upcoming

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

#: More would be a listing nobody reads, and a typo (``--next 100000``) a long wait.
MOST = 1000


def next_for_expression(args: argparse.Namespace, out: TextIO) -> int:
    """``--next N --schedule EXPR``: no configuration, no database.

    Raises:
        ConfigurationError: naming the option and its bad value (one line).
    """
    try:
        zone = check_zone(args.time_zone or "UTC")
    except ValueError as exc:
        raise ConfigurationError("--time-zone", str(exc)) from None
    frequency, _, time = args.schedule.partition("|")
    try:
        schedule = parse_schedule(frequency, time.strip() or None, zone)
    except ValueError as exc:
        raise ConfigurationError("--schedule", str(exc)) from None
    return _print(schedule, args, out)


def next_for_job(jobs: list[Job], args: argparse.Namespace, out: TextIO) -> int:
    """``--next N --job NAME``: the configured job's schedule (its zone and delay).

    Raises:
        ConfigurationError: a bad ``--next`` or ``--after``, or ``--time-zone`` given.
        JobNotFound: no configured job is called NAME.
    """
    if args.time_zone:
        raise ConfigurationError("--time-zone", "with --job the job's own time_zone is used")
    job = find_job(jobs, args.job)
    if job is None:
        raise JobNotFound(args.job, [j.app_name for j in jobs])
    return _print(job.schedule, args, out)


def _print(schedule: Schedule, args: argparse.Namespace, out: TextIO) -> int:
    count = _count(args.next)
    times = upcoming(schedule, _after(args.after, schedule.zone), count)
    if args.json:
        jsonout.emit([jsonout.time_text(when) for when in times], out)
        return 0
    zone = _tzinfo(schedule.zone)
    for when in times:
        local = when.astimezone(zone).isoformat()
        utc = jsonout.time_text(when)
        print(local if schedule.zone == "UTC" else f"{local}  ({utc})", file=out)
    return 0


def _count(text: str) -> int:
    """``--next N``: a whole number from 1 to :data:`MOST`.

    Raises:
        ConfigurationError: anything else.
    """
    value = int(text) if text.strip().isdigit() else 0
    if not 1 <= value <= MOST:
        raise ConfigurationError("--next", f"N must be from 1 to {MOST}, not {text!r}")
    return value


def _after(text: str, zone: str) -> dt.datetime:
    """``--after``: ISO 8601, in ``zone`` without an offset; empty: now (this host's clock).

    Raises:
        ConfigurationError: not ISO 8601.
    """
    if not text.strip():
        return dt.datetime.now(dt.timezone.utc)
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigurationError(
            "--after",
            f"{text!r} is not an ISO 8601 time (2026-03-29T01:00, 2026-03-29T01:00+02:00)",
        ) from None
    return when.replace(tzinfo=_tzinfo(zone)) if when.tzinfo is None else when


def _tzinfo(zone: str) -> dt.tzinfo:
    from ..cron import zone_of

    return zone_of(zone)
