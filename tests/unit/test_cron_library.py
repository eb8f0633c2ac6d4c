"""Our fire times against cronsim's own, computed directly: hundreds of generated
expressions in ten zones, from every DST transition of two years and from ordinary days.

The expressions are generated (a fixed seed), never paired with hard-coded answers: the
answer each time is what cronsim itself gives for the same expression, zone and start. What
this proves is our side: the zone conversions, the strictly-after rule, the UTC results, the
first-run and backfill rules built on them (tests/unit/test_cron_dst.py checks the DST
rule itself on hand-worked cases).
"""

from __future__ import annotations

import datetime as dt
import random
import zoneinfo

import pytest
from cronsim import CronSim

from crontabber.cron import fires_between, previous_fire
from crontabber.schedule import parse_schedule
from crontabber.scheduling import backfill_dates, next_run_after

UTC = dt.timezone.utc
ZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "America/Sao_Paulo",
    "Asia/Kolkata",
    "Pacific/Chatham",
    "America/St_Johns",
    "Africa/Casablanca",
)
START = dt.datetime(2025, 1, 1, tzinfo=UTC)
END = dt.datetime(2027, 1, 1, tzinfo=UTC)
STEPS = 6  # fire times compared from each start

MINUTES = ("0", "30", "*/15", "5,35", "59", "*", "0-10/5", "*/7", "45")
HOURS = ("*", "2", "1-3", "*/2", "0", "23", "1,2,3", "9-17", "3")
DAYS = ("*", "1", "15", "L", "*/10", "29", "31", "1,15", "LW")
MONTHS = ("*", "*", "*", "3", "10-11", "JAN,JUL", "*/3", "2")
WEEKDAYS = ("*", "*", "*", "MON-FRI", "0", "SAT,SUN", "1#2", "5L", "MON")
MACROS = ("@hourly", "@daily", "@weekly", "@monthly", "@yearly")


def generated_expressions(count: int = 240) -> list[str]:
    """``count`` distinct valid expressions from the pools above (and every macro)."""
    rng = random.Random(40)
    found: list[str] = list(MACROS)
    while len(found) < count:
        fields = [rng.choice(pool) for pool in (MINUTES, HOURS, DAYS, MONTHS, WEEKDAYS)]
        text = " ".join(fields)
        if text in found:
            continue
        try:
            parse_schedule(text, None)
        except ValueError:
            continue  # never fires (31 in February): refused, as tested elsewhere
        found.append(text)
    return found


EXPRESSIONS = generated_expressions()


def transitions(zone: str) -> list[dt.datetime]:
    """The instants (UTC) at which ``zone``'s offset changed in the two years, found by
    hourly steps then narrowed to the minute."""
    tz = zoneinfo.ZoneInfo(zone)
    found = []
    when = START
    while when < END:
        later = when + dt.timedelta(hours=1)
        if when.astimezone(tz).utcoffset() != later.astimezone(tz).utcoffset():
            low, high = when, later
            while high - low > dt.timedelta(minutes=1):
                middle = low + (high - low) / 2
                same = low.astimezone(tz).utcoffset() == middle.astimezone(tz).utcoffset()
                low, high = (middle, high) if same else (low, middle)
            found.append(high)
        when = later
    return found


def starts(zone: str, rng: random.Random) -> list[dt.datetime]:
    """Where the comparisons start: a day and an hour before each transition, half an hour
    after it (in an hour that repeats, its second pass), and four ordinary moments."""
    spans = (dt.timedelta(days=-1), dt.timedelta(hours=-1), dt.timedelta(minutes=30))
    points = [when + span for when in transitions(zone) for span in spans]
    seconds = int((END - START).total_seconds())
    return points + [START + dt.timedelta(seconds=rng.randrange(seconds)) for _ in range(4)]


def cronsim_fires(expression: str, zone: str, start: dt.datetime, count: int) -> list[dt.datetime]:
    """cronsim's first ``count`` fire times after ``start``, in UTC. From a start in the
    second pass of a repeated hour, cronsim's wall-clock iteration of a fixed-time
    expression may first give the first pass of a later minute, which is before the start:
    that one is no fire after the start, and is left out (the only difference we make)."""
    tz = UTC if zone == "UTC" else zoneinfo.ZoneInfo(zone)
    iterator = (when.astimezone(UTC) for when in CronSim(expression, start.astimezone(tz)))
    return [when for _, when in zip(range(count), (when for when in iterator if when > start))]


def test_the_zones_have_transitions_to_compare_across():
    assert len(transitions("Europe/Berlin")) == 4  # two springs, two autumns
    assert len(transitions("Australia/Lord_Howe")) == 4
    assert transitions("UTC") == [] and transitions("Asia/Kolkata") == []
    assert len(EXPRESSIONS) == 240


@pytest.mark.parametrize("zone", ZONES)
def test_next_runs_are_cronsims_fire_times(zone):
    """A chain of successful runs, each started at its fire time, is due at cronsim's
    next fire times: hundreds of expressions, every transition of two years."""
    rng = random.Random(zone)
    points = starts(zone, rng)
    compared = 0
    for text in EXPRESSIONS:
        schedule = parse_schedule(text, None, zone)
        assert schedule.expression is not None
        for start in rng.sample(points, min(len(points), 3)):
            expected = cronsim_fires(schedule.expression, zone, start, STEPS)
            ours, when = [], start
            for _ in range(STEPS):
                when = next_run_after(when, schedule, True, 0)
                ours.append(when)
            assert ours == expected, (text, zone, start)
            compared += STEPS
    assert compared >= len(EXPRESSIONS) * 3 * STEPS


@pytest.mark.parametrize("zone", ZONES[:5])
def test_previous_fire_and_backfill_agree_with_cronsim(zone):
    """previous_fire(t) is the last of cronsim's fires at or before t; a backfill job's
    intervals are cronsim's fires between its last success and now."""
    rng = random.Random(f"back-{zone}")
    points = starts(zone, rng)
    for text in rng.sample(EXPRESSIONS, 60):
        schedule = parse_schedule(text, None, zone)
        assert schedule.expression is not None
        start = rng.choice(points)
        fired = cronsim_fires(schedule.expression, zone, start, 4)
        now = fired[-1] + dt.timedelta(seconds=1)
        assert previous_fire(schedule.expression, zone, now) == fired[-1], (text, zone, start)
        assert previous_fire(schedule.expression, zone, fired[-1]) == fired[-1]
        assert backfill_dates(fired[0], schedule, now) == fired[1:], (text, zone, start)
        assert backfill_dates(fired[0], schedule, fired[-1]) == fired[1:-1]
        assert fires_between(schedule.expression, zone, fired[0], fired[-1]) == fired[:-1]
