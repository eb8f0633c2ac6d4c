"""Pure rules behind --pause and --rerun (crontabber/scheduling.py)."""

import datetime as dt

import pytest

from crontabber.scheduling import parse_day, parse_schedule, parse_until, pause_active, rerun_dates
from crontabber.state import JobState

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("30m", NOW + dt.timedelta(minutes=30)),
        ("2h", NOW + dt.timedelta(hours=2)),
        ("3d", NOW + dt.timedelta(days=3)),
        ("2026-11-24", dt.datetime(2026, 11, 24, tzinfo=UTC)),
        ("2026-11-24T06:00", dt.datetime(2026, 11, 24, 6, tzinfo=UTC)),
        ("2026-11-24 06:00", dt.datetime(2026, 11, 24, 6, tzinfo=UTC)),
    ],
)
def test_parse_until(text, expected):
    assert parse_until(text, NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "2026-11-23T11:00", "0m", "-2h", "2w"])
def test_parse_until_refuses_nonsense_and_the_past(text):
    with pytest.raises(ValueError):
        parse_until(text, NOW)


def test_a_pause_is_active_until_it_ends():
    assert not pause_active(None, NOW)
    assert not pause_active(JobState("a"), NOW)
    assert pause_active(JobState("a", paused_until=NOW + dt.timedelta(seconds=1)), NOW)
    assert not pause_active(JobState("a", paused_until=NOW), NOW)


def test_rerun_dates_use_the_jobs_time_of_day():
    days = rerun_dates(
        parse_schedule("1d", "00:30"), None, dt.date(2026, 11, 20), dt.date(2026, 11, 22), NOW
    )
    assert days == [dt.datetime(2026, 11, d, 0, 30, tzinfo=UTC) for d in (20, 21, 22)]


def test_rerun_dates_without_a_time_of_day_follow_the_last_success():
    last = dt.datetime(2026, 11, 22, 5, 17, 19, tzinfo=UTC)
    assert rerun_dates(
        parse_schedule("1d", None), last, dt.date(2026, 11, 21), dt.date(2026, 11, 21), NOW
    ) == [dt.datetime(2026, 11, 21, 5, 17, 19, tzinfo=UTC)]


def test_rerun_dates_of_a_sub_daily_job_cover_the_whole_day_and_stop_before_now():
    last = dt.datetime(2026, 11, 22, 5, 0, tzinfo=UTC)
    days = rerun_dates(
        parse_schedule("6h", None), last, dt.date(2026, 11, 23), dt.date(2026, 11, 23), NOW
    )
    assert days == [dt.datetime(2026, 11, 23, h, 0, tzinfo=UTC) for h in (5, 11)]


def test_rerun_dates_refuse_an_inverted_range():
    with pytest.raises(ValueError, match="before --date"):
        rerun_dates(
            parse_schedule("1d", None), None, dt.date(2026, 11, 2), dt.date(2026, 11, 1), NOW
        )
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        parse_day("11/02/2026")
