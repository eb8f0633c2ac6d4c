"""The DST rule on real transitions, each expected time worked out by hand (the reasoning
is in the comments, from the zone's published offsets), and the parsing of expressions and
zones: one line naming the field or the zone."""

from __future__ import annotations

import datetime as dt

import pytest

from crontabber.errors import ConfigurationError
from crontabber.schedule import parse_job_entry, parse_schedule, split_jobs_list
from crontabber.scheduling import first_due_at, first_run_due, is_due, next_run_after, upcoming

UTC = dt.timezone.utc


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def runs(expression: str, zone: str, after: str, count: int) -> list[dt.datetime]:
    return upcoming(parse_schedule(expression, None, zone), at(after), count)


def test_berlin_spring_forward_0230_runs_once_at_0300():
    # 2026-03-29 02:00 CET (+01:00) becomes 03:00 CEST (+02:00): 02:30 does not exist. A
    # fixed-time job runs at the first minute after the gap, 03:00 CEST = 01:00 UTC.
    # The day before: 02:30 CET = 01:30 UTC; the day after: 02:30 CEST = 00:30 UTC.
    assert runs("30 2 * * *", "Europe/Berlin", "2026-03-28 00:00", 3) == [
        at("2026-03-28 01:30"),
        at("2026-03-29 01:00"),
        at("2026-03-30 00:30"),
    ]


def test_berlin_fall_back_0230_runs_once_at_its_first_pass():
    # 2026-10-25 03:00 CEST (+02:00) becomes 02:00 CET (+01:00): 02:00-02:59 happens twice.
    # A fixed-time job runs once, on the first pass: 02:30 CEST = 00:30 UTC (not again at
    # 02:30 CET = 01:30 UTC); the next day 02:30 CET = 01:30 UTC.
    assert runs("30 2 * * *", "Europe/Berlin", "2026-10-24 12:00", 2) == [
        at("2026-10-25 00:30"),
        at("2026-10-26 01:30"),
    ]


def test_berlin_fall_back_every_half_hour_fires_in_both_passes():
    # A job with '*' in its minute or hour field follows elapsed time: in the repeated
    # hour it fires at 02:30 CEST (00:30Z), 02:00 CET (01:00Z), 02:30 CET (01:30Z).
    assert runs("*/30 * * * *", "Europe/Berlin", "2026-10-25 00:00", 4) == [
        at("2026-10-25 00:30"),
        at("2026-10-25 01:00"),
        at("2026-10-25 01:30"),
        at("2026-10-25 02:00"),
    ]


def test_berlin_spring_forward_hourly_skips_the_missing_hour():
    # 01:00 CET = 00:00Z, then the clocks read 03:00 CEST at 01:00Z: no 02:00 fire.
    assert runs("0 * * * *", "Europe/Berlin", "2026-03-28 23:30", 3) == [
        at("2026-03-29 00:00"),
        at("2026-03-29 01:00"),
        at("2026-03-29 02:00"),
    ]


def test_new_york_both_transitions():
    # 2026-03-08 02:00 EST (-05:00) becomes 03:00 EDT (-04:00): 02:30 runs at 03:00 EDT =
    # 07:00Z; the day before 02:30 EST = 07:30Z; the day after 02:30 EDT = 06:30Z.
    assert runs("30 2 * * *", "America/New_York", "2026-03-07 00:00", 3) == [
        at("2026-03-07 07:30"),
        at("2026-03-08 07:00"),
        at("2026-03-09 06:30"),
    ]
    # 2026-11-01 02:00 EDT becomes 01:00 EST: 01:30 happens twice; once, at 01:30 EDT =
    # 05:30Z; the next day 01:30 EST = 06:30Z.
    assert runs("30 1 * * *", "America/New_York", "2026-10-31 12:00", 2) == [
        at("2026-11-01 05:30"),
        at("2026-11-02 06:30"),
    ]


def test_lord_howe_half_hour_shifts():
    # Lord Howe is +10:30, +11:00 in summer, and moves by 30 minutes. 2026-10-04 02:00
    # becomes 02:30: 02:15 does not exist and runs at 02:30 (+11:00) = 2026-10-03 15:30Z.
    # The day before: 02:15 +10:30 = 15:45Z; the day after: 02:15 +11:00 = 15:15Z.
    assert runs("15 2 * * *", "Australia/Lord_Howe", "2026-10-02 00:00", 3) == [
        at("2026-10-02 15:45"),
        at("2026-10-03 15:30"),
        at("2026-10-04 15:15"),
    ]
    # 2026-04-05 02:00 (+11:00) becomes 01:30 (+10:30): 01:45 happens twice; once, at
    # 01:45 +11:00 = 2026-04-04 14:45Z; the next day 01:45 +10:30 = 2026-04-05 15:15Z.
    assert runs("45 1 * * *", "Australia/Lord_Howe", "2026-04-04 00:00", 2) == [
        at("2026-04-04 14:45"),
        at("2026-04-05 15:15"),
    ]


def test_apia_skipped_a_whole_day():
    # Samoa crossed the date line: 2011-12-29 23:59:59 -10:00 was followed by 2011-12-31
    # 00:00 +14:00 (both at 10:00Z); 2011-12-30 never happened. 02:30 of the 29th is
    # 12:30Z. The 30th's 02:30 does not exist: by the rule it runs at the first minute after
    # it, 2011-12-31 00:00 +14:00 = 2011-12-30 10:00Z, and the 31st's 02:30 +14:00 =
    # 2011-12-30 12:30Z follows (Debian's cron treats a jump of 3 hours or more as a new
    # clock setting and would skip the 30th's: the one difference, docs/writing-a-job.md).
    assert runs("30 2 * * *", "Pacific/Apia", "2011-12-29 00:00", 3) == [
        at("2011-12-29 12:30"),
        at("2011-12-30 10:00"),
        at("2011-12-30 12:30"),
    ]


def test_crontabbers_time_of_day_follows_the_same_rule_in_its_zone():
    # 1d|02:30 in Berlin: after a run at 02:30 CET on 2026-03-28 (01:30Z), the next is the
    # 29th's 02:30, which does not exist: 03:00 CEST = 01:00Z; then 02:30 CEST = 00:30Z.
    schedule = parse_schedule("1d", "02:30", "Europe/Berlin")
    assert next_run_after(at("2026-03-28 01:30"), schedule, True, 0) == at("2026-03-29 01:00")
    assert next_run_after(at("2026-03-29 01:00"), schedule, True, 0) == at("2026-03-30 00:30")
    # and in UTC it is crontabber's rule, unchanged
    utc = parse_schedule("1d", "02:30")
    assert next_run_after(at("2026-03-28 01:30"), utc, True, 0) == at("2026-03-29 02:30")


def test_a_cron_job_that_never_ran_is_due_once_a_fire_time_of_today_passed():
    weekdays = parse_schedule("0 3 * * 1-5", None, "Europe/Berlin")
    # Saturday 2026-11-28, 10:00 UTC: no fire today in Berlin: not due, due Monday 03:00 CET
    assert not first_run_due(weekdays, at("2026-11-28 10:00"))
    assert first_due_at(weekdays, at("2026-11-28 10:00")) is None
    assert not is_due(None, weekdays, at("2026-11-28 10:00"))
    # Monday 2026-11-30: 03:00 CET = 02:00Z; due from then, that day
    assert not first_run_due(weekdays, at("2026-11-30 01:59"))
    assert first_due_at(weekdays, at("2026-11-30 09:00")) == at("2026-11-30 02:00")
    assert is_due(None, weekdays, at("2026-11-30 02:00:30"))


def test_a_zoned_time_of_day_is_due_on_that_zones_clock():
    # 1d|05:00 in New York: 05:00 EST = 10:00Z; at 09:59Z it is not yet 05:00 there
    schedule = parse_schedule("1d", "05:00", "America/New_York")
    assert not first_run_due(schedule, at("2026-11-28 09:59"))
    assert first_due_at(schedule, at("2026-11-28 10:01")) == at("2026-11-28 10:00")


@pytest.mark.parametrize(
    "expression,problem",
    [
        ("61 * * * *", "bad minute field '61'"),
        ("0 24 * * *", "bad hour field '24'"),
        ("0 0 0 * *", "bad day-of-month field '0'"),
        ("0 0 * 13 *", "bad month field '13'"),
        ("0 0 * * 8", "bad day-of-week field '8'"),
        ("0 0 * FOO *", "bad month field 'FOO'"),
        ("*/0 * * * *", "bad minute field '*/0'"),
        ("5-1 * * * *", "bad minute field '5-1'"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
        ("* * */20 * 1L", "never fires"),
        ("0 0 * *", "expected 5 fields"),
        ("0 0 0 * * *", "expected 5 fields"),
        ("@reboot", "unknown macro '@reboot'"),
    ],
)
def test_a_bad_expression_is_one_line_naming_the_field(expression, problem):
    with pytest.raises(ValueError) as info:
        parse_schedule(expression, None)
    assert problem in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ConfigurationError, match=problem.replace("*", r"\*")):
        parse_job_entry(f"pkg.Cls|{expression}")


def test_crontabbers_frequency_with_a_space_is_still_one():
    # crontabber's pattern allows spaces between the number and the unit: not a cron expression
    spaced = parse_schedule("5 m", None)
    assert spaced.seconds == 300 and spaced.expression is None
    assert parse_job_entry("pkg.Cls| 2 h").frequency == "2 h"
    with pytest.raises(ValueError, match="expected 5 fields"):
        parse_schedule("5 m 3", None)


def test_expressions_as_written():
    assert parse_schedule("@daily", None).expression == "0 0 * * *"
    assert parse_schedule("0  3 * *   mon-fri", None).expression == "0 3 * * MON-FRI"
    zoned = parse_schedule("0  3 * *   mon-fri", None, "Europe/Berlin")
    assert str(zoned) == "0 3 * * mon-fri Europe/Berlin"
    assert str(parse_schedule("1d", "05:00", "Europe/Berlin")) == "1d @ 05:00 Europe/Berlin"
    assert str(parse_schedule("5m", None, "Europe/Berlin")) == "5m"  # no clock read: no zone shown
    with pytest.raises(ValueError, match="takes no time of day"):
        parse_schedule("0 3 * * *", "05:00")
    with pytest.raises(ValueError, match="unknown time zone 'Europe/Berln'"):
        parse_schedule("0 3 * * *", None, "Europe/Berln")


def test_the_jobs_list_keeps_a_cron_expressions_commas():
    text = "a.B|0 9,17 * * MON,FRI, c.D|5m\ne.F|1d|05:00; g.H|@daily,\n# x.Y|0 1,2 * * *"
    assert split_jobs_list(text) == [
        "a.B|0 9,17 * * MON,FRI",
        "c.D|5m",
        "e.F|1d|05:00",
        "g.H|@daily",
    ]
    entry = parse_job_entry("a.B | 0 9,17 * * MON,FRI")
    assert (entry.frequency, entry.time) == ("0 9,17 * * MON,FRI", None)


def test_a_delay_must_be_shorter_than_the_shortest_gap_between_fire_times():
    minute = dt.timedelta(minutes=1)
    every_quarter = parse_schedule("*/15 * * * *", None)
    assert every_quarter.delayed(10 * minute, dt.timedelta(0), "x").delay == 10 * minute
    with pytest.raises(ValueError, match="shortest time between the job's fire times"):
        every_quarter.delayed(10 * minute, 5 * minute, "x")
    # 01:00 and 03:00 in New York are an hour apart on the day 02:00 is skipped
    with pytest.raises(ValueError, match=r"\(1:00:00\)"):
        twice = parse_schedule("0 1,3 * * *", None, "America/New_York")
        twice.delayed(61 * minute, dt.timedelta(0), "x")
