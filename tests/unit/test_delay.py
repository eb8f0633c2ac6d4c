"""Settle lag and deterministic jitter: a job sees the clock ``lag + jitter`` late."""

import datetime as dt

import pytest

from crontabber.scheduling import (
    backfill_dates,
    first_due_at,
    is_due,
    jitter_offset,
    next_run_after,
    parse_duration,
    parse_schedule,
)

UTC = dt.timezone.utc
M = dt.timedelta(minutes=1)


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_the_jitter_is_fixed_by_the_name_and_spread():
    spread = dt.timedelta(minutes=15)
    offsets = {name: jitter_offset(name, spread) for name in (f"job-{i}" for i in range(200))}
    assert offsets == {name: jitter_offset(name, spread) for name in offsets}  # not re-drawn
    assert all(dt.timedelta(0) <= o < spread and o.microseconds == 0 for o in offsets.values())
    # spread over the window, not bunched: every 3-minute fifth of it holds some jobs
    assert {int(o.total_seconds() // 180) for o in offsets.values()} == {0, 1, 2, 3, 4}
    assert jitter_offset("job-1", dt.timedelta(0)) == dt.timedelta(0)


def test_a_timed_job_with_jitter_is_due_that_much_later_every_day():
    name = "nightly"
    schedule = parse_schedule("1d", "06:00").delayed(dt.timedelta(0), 15 * M, name)
    offset = jitter_offset(name, 15 * M)
    assert schedule.delay == offset > dt.timedelta(0)
    start = at("2026-11-25T06:00:00") + offset
    assert not is_due(None, schedule, start - dt.timedelta(seconds=1))
    assert is_due(None, schedule, start)
    assert first_due_at(schedule, start + M) == start
    # after a run that started late in its tick, the next is due at 06:00 + offset again
    assert next_run_after(
        start + 40 * dt.timedelta(seconds=1), schedule, True, 0
    ) == start + dt.timedelta(days=1)


def test_a_delay_across_midnight_keeps_the_day():
    schedule = parse_schedule("1d", "23:55").delayed(dt.timedelta(0), dt.timedelta(0), "x")
    late = parse_schedule("1d", "23:55").delayed(10 * M, dt.timedelta(0), "x")
    started = at("2026-11-26T00:05:30")  # the 25th's run, 10 minutes after 23:55
    assert next_run_after(started, late, True, 0) == at("2026-11-27T00:05:00")
    # without the delay counted on the job's clock it would have skipped a day
    assert next_run_after(started, schedule, True, 0) == at("2026-11-27T23:55:00")


def test_a_backfill_interval_runs_only_after_its_settle_lag():
    schedule = parse_schedule("1d", None).delayed(dt.timedelta(hours=6), dt.timedelta(0), "report")
    last = at("2026-11-23T00:00:00")
    assert backfill_dates(last, schedule, at("2026-11-25T05:59:00")) == [at("2026-11-24T00:00:00")]
    assert backfill_dates(last, schedule, at("2026-11-25T06:01:00")) == [
        at("2026-11-24T00:00:00"),
        at("2026-11-25T00:00:00"),
    ]
    plain = parse_schedule("1d", None)
    assert backfill_dates(last, plain, at("2026-11-25T05:59:00")) == [
        at("2026-11-24T00:00:00"),
        at("2026-11-25T00:00:00"),
    ]


def test_a_delay_of_a_whole_interval_is_refused():
    with pytest.raises(ValueError, match="shorter than the job's frequency"):
        parse_schedule("1h", None).delayed(dt.timedelta(minutes=30), dt.timedelta(minutes=30), "x")
    with pytest.raises(ValueError, match="negative"):
        parse_schedule("1h", None).delayed(-M, dt.timedelta(0), "x")


@pytest.mark.parametrize(
    "text, seconds",
    [("0", 0), ("600", 600), ("10m", 600), ("6h", 21600), ("1d", 86400), (" 90 ", 90), ("", 0)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["-5", "10x", "1h30m", "soon"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)
